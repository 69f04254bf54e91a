import { defineConfig } from "vite";

// Preact through esbuild's automatic JSX runtime: no framework plugin needed.
export default defineConfig({
  esbuild: { jsx: "automatic", jsxImportSource: "preact" },
  build: { outDir: "dist", emptyOutDir: true, target: "es2022", sourcemap: false },
  test: { environment: "node", include: ["src/**/*.test.ts"] },
  server: {
    proxy: {
      "^/(auth|sessions|repos|secrets|environments|tokens|health|inbox|notifications)": {
        target: "http://127.0.0.1:8787",
        ws: true,
      },
    },
  },
});
