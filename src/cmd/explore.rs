//! `heisenbench explore`: the interactive page (figures::explore) on loopback.

use std::io::Write;

use heisenbench_live::pages::serve_pages;

use crate::Failure;
use crate::args::ExploreArgs;

pub fn run(a: ExploreArgs, out: &mut dyn Write) -> Result<(), Failure> {
    let ctrl_c = super::mock::CtrlC::listen()?;
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], a.port));
    let server = serve_pages(addr, |path, query, abandoned| {
        let r = heisenbench_figures::explore::handle_unless(path, query, &|| abandoned.is_set());
        (r.status, r.content_type, r.body)
    })
    .map_err(Failure::from)?;
    let url = format!("{}/", server.url());
    writeln!(out, "heisenbench explore on {url} (Ctrl-C stops it)")?;
    out.flush()?;
    if a.open {
        // The desktop's browser, if it has one; the address above works either way.
        let _ = std::process::Command::new("xdg-open").arg(&url).spawn();
    }
    ctrl_c.wait();
    server.shutdown();
    Ok(())
}
