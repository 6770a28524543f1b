//! Every flag of the command line (clap), one file a command family. The libraries know no
//! clap: a flag parses as a library's value type (its `FromStr`), and a command turns its
//! flags into the library's config once.

pub mod audit;
pub mod calibrate;
pub mod mock;
pub mod model;
pub mod run;
pub mod sim;

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
