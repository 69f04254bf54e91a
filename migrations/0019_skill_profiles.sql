-- A person's saved subsets of the managed skills (inspect-skills, profiles).
CREATE TABLE skill_profiles (
    user_id TEXT NOT NULL,
    name TEXT NOT NULL,
    skills TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (user_id, name)
);
