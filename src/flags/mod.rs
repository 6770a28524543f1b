//! Every flag of the command line (clap), one file a command family. The libraries know no
//! clap: a flag parses as a library's value type (its `FromStr`), and a command turns its
//! flags into the library's config once.

pub mod audit;
pub mod calibrate;
pub mod mock;
pub mod model;
pub mod run;
pub mod sim;

/// When a flag does nothing.
#[derive(Debug, Clone, Copy)]
pub enum Idle {
    /// Without this other argument (clap's id).
    Without(&'static str),
    /// Beside this other argument (clap's id).
    With(&'static str),
}

/// A flag the command would ignore in some company, and what the flag is for. Such a flag
/// is refused in one line rather than ignored. clap's `requires` cannot say all of these:
/// it drops a requirement once an argument in conflict with the one required is given, and
/// it cannot tell a default from a value given.
#[derive(Debug, Clone)]
pub struct Rule {
    /// The flag (clap's id).
    pub flag: String,
    /// The company it does nothing in.
    pub idle: Idle,
    /// What it is for, said after the refusal.
    pub why: &'static str,
}

impl Rule {
    /// `flag` does nothing without `other`.
    pub fn without(flag: &str, other: &'static str, why: &'static str) -> Self {
        Self {
            flag: flag.to_string(),
            idle: Idle::Without(other),
            why,
        }
    }

    /// `flag` does nothing beside `other`.
    pub fn with(flag: &str, other: &'static str, why: &'static str) -> Self {
        Self {
            flag: flag.to_string(),
            idle: Idle::With(other),
            why,
        }
    }
}

/// Flags whose use depends on the company they keep.
pub trait IdleFlags {
    /// The flags this command ignores in some company.
    fn idle_rules() -> Vec<Rule>;
}

/// The first flag given on the command line that `rules` say does nothing in the company
/// it was given in, as one line; a default counts as not given.
pub fn idle_flag(cmd: &clap::Command, m: &clap::ArgMatches, rules: &[Rule]) -> Option<String> {
    let given = |id: &str| m.value_source(id) == Some(clap::parser::ValueSource::CommandLine);
    rules.iter().find_map(|r| {
        if !given(&r.flag) {
            return None;
        }
        let (word, other, idle) = match r.idle {
            Idle::Without(other) => ("without", other, !given(other)),
            Idle::With(other) => ("beside", other, given(other)),
        };
        idle.then(|| {
            format!(
                "{} does nothing {word} {}: {}",
                arg_name(cmd, &r.flag),
                arg_name(cmd, other),
                r.why
            )
        })
    })
}

/// How the user writes the argument `id`: `--long`, or `<NAME>` for a positional one.
fn arg_name(cmd: &clap::Command, id: &str) -> String {
    let arg = cmd.get_arguments().find(|a| a.get_id() == id);
    match arg.and_then(clap::Arg::get_long) {
        Some(long) => format!("--{long}"),
        None => {
            let name = arg
                .and_then(clap::Arg::get_value_names)
                .and_then(|n| n.first())
                .map_or_else(|| id.to_uppercase(), ToString::to_string);
            format!("<{name}>")
        }
    }
}

#[cfg(test)]
/// `T`'s flags read from `args` (no program name first) as a command made of them alone
/// reads them: what a group of flags gives, for its `Default` and for tests.
pub fn parse_flags<T: clap::Args + clap::FromArgMatches>(
    args: &[&str],
) -> std::result::Result<T, clap::Error> {
    let cmd = T::augment_args(clap::Command::new("flags"));
    let m = cmd.try_get_matches_from(std::iter::once("flags").chain(args.iter().copied()))?;
    T::from_arg_matches(&m)
}

#[cfg(test)]
/// `T`'s flags read from `args` as [`parse_flags`] does, with a flag its rules say does
/// nothing in that company refused as the command line refuses it.
pub fn parse_checked<T: clap::Args + clap::FromArgMatches + IdleFlags>(
    args: &[&str],
) -> std::result::Result<T, String> {
    let cmd = T::augment_args(clap::Command::new("flags"));
    let m = cmd
        .clone()
        .try_get_matches_from(std::iter::once("flags").chain(args.iter().copied()))
        .map_err(|e| e.to_string())?;
    if let Some(why) = idle_flag(&cmd, &m, &T::idle_rules()) {
        return Err(why);
    }
    T::from_arg_matches(&m).map_err(|e| e.to_string())
}

#[cfg(test)]
/// Every flag `T`'s rules name is one of its arguments (an unknown id would make the rule
/// never apply, or panic where clap checks ids).
pub fn assert_rules_name_flags<T: clap::Args + IdleFlags>() {
    let cmd = T::augment_args(clap::Command::new("flags"));
    let known = |id: &str| cmd.get_arguments().any(|a| a.get_id() == id);
    for r in T::idle_rules() {
        let other = match r.idle {
            Idle::Without(o) | Idle::With(o) => o,
        };
        assert!(known(&r.flag), "{} is not a flag", r.flag);
        assert!(known(other), "{other} is not a flag");
    }
}
