// Style sheets imported for their side effect (Vite puts them in the page).
declare module "*.css";
