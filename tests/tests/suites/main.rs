//! Every integration and end-to-end suite, one module each, in one test program: as 27
//! programs each compiled and linked its own copy of the harness's generic code (~50 CPU-s
//! of every cold build). nextest still runs each test in its own process; a suite is a
//! module, so `cargo nextest run -p inspect-tests -E 'test(/^slack::/)'` runs one, and
//! `cargo test -p inspect-tests --test suites -- slack::` the same with cargo's runner.

mod auth;
mod automations;
mod changes;
mod children;
mod cli;
mod dev_run;
mod fuzz;
mod github;
mod health;
mod images;
mod inbox;
mod layout;
mod linear;
mod media;
mod operations;
mod people;
mod provider_smoke;
mod providers;
mod sandbox;
mod sandbox_image;
mod security;
mod session;
mod settings_documented;
mod slack;
mod terminal;
mod usage;
mod web;
