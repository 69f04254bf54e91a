//! Where the [`Printer`](crate::render::Printer)'s output goes. On a terminal: what is under
//! way as a spinner (indicatif) on stderr, the agent's Markdown rendered for the terminal
//! (termimad), lines printed above the spinner. Into a pipe or a file: plain lines, nothing
//! drawn.

use crate::render::{plain, Out};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::time::Duration;

pub struct Screen {
    /// Set when stdout is a terminal.
    skin: Option<termimad::MadSkin>,
    spinner: Option<ProgressBar>,
}

impl Screen {
    pub fn new() -> Screen {
        let skin = std::io::stdout()
            .is_terminal()
            .then(termimad::MadSkin::default);
        Screen {
            skin,
            spinner: None,
        }
    }

    pub fn show(&mut self, outs: Vec<Out>) {
        for out in outs {
            self.one(out);
        }
    }

    fn one(&mut self, out: Out) {
        let Some(skin) = &self.skin else {
            if let Some(text) = plain(&out) {
                println!("{text}");
            }
            return;
        };
        match out {
            Out::Line(line) => self.above(|| println!("{line}")),
            Out::Text(text) => {
                let rendered = skin.term_text(&text).to_string();
                self.above(|| print!("{rendered}"));
            }
            Out::Doing(what) => {
                let bar = self.spinner.get_or_insert_with(|| {
                    let bar = ProgressBar::new_spinner();
                    if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} {elapsed}") {
                        bar.set_style(style);
                    }
                    bar.enable_steady_tick(Duration::from_millis(120));
                    bar
                });
                bar.set_message(what);
            }
            Out::Idle => {
                if let Some(bar) = self.spinner.take() {
                    bar.finish_and_clear();
                }
            }
        }
    }

    /// A note of the CLI's own (reconnecting, an error message), on stderr.
    pub fn note(&self, text: &str) {
        self.above(|| eprintln!("{text}"));
    }

    fn above(&self, print: impl FnOnce()) {
        match &self.spinner {
            Some(bar) => bar.suspend(print),
            None => print(),
        }
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        if let Some(bar) = self.spinner.take() {
            bar.finish_and_clear();
        }
    }
}
