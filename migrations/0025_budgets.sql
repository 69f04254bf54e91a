-- Monthly budgets that stop spend: the deployment's (subject ''), a person's (their user
-- id) or each person's (subject '*'), on sandbox hours, model tokens or model cost in
-- dollars, per UTC calendar month.
CREATE TABLE budgets (
    scope TEXT NOT NULL CHECK (scope IN ('deployment', 'person')),
    subject TEXT NOT NULL,
    metric TEXT NOT NULL CHECK (metric IN ('sandbox_hours', 'tokens', 'cost_usd')),
    monthly_limit REAL NOT NULL,
    updated_by TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (scope, subject, metric)
);
