//! Opening an address that carries a secret in a browser without putting it on any command line.
//!
//! The secret is the dashboard's launch token or an OAuth login's `state`. A page only
//! the user can read, beside the daemon's socket, sends the browser on, and `xdg-open` is
//! given the page's path. The page is removed once the browser has read it, or when the
//! command ends.
//!
//! A command line is readable by every process on the machine (`/proc/PID/cmdline`), and
//! `xdg-open URL` hands the URL on to the browser's own command line. The page's
//! directory is 0700 and the page 0600: the user's own browser reads it, a confined
//! server (whose sandbox grants nothing of the daemon's runtime directory) cannot.

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What the page does as soon as the browser shows it.
pub enum Page<'a> {
    /// Posts a form of `fields` to `action` (the dashboard's login).
    Post {
        action: &'a str,
        fields: &'a [(&'a str, &'a str)],
    },
    /// Goes to an `http(s)` address (an authorization server's login page).
    Go(&'a str),
}

/// Why a launch page could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("the launch page {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the address is not http or https")]
    NotHttp,
    #[error("xdg-open could not be started: {0}")]
    Open(std::io::Error),
}

/// A launch page given to the browser: removed when this is dropped.
pub struct Launched {
    path: PathBuf,
    /// Tells when the browser has read the page (None where inotify is unavailable).
    watch: Option<Watch>,
    opener: Option<std::process::Child>,
}

/// The inotify instance watching the page.
struct Watch(Inotify);

impl AsRawFd for Watch {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

/// Writes the page into `dir/launch/` and starts `xdg-open PAGE`.
pub fn open(dir: &Path, page: &Page<'_>) -> Result<Launched, LaunchError> {
    let html = render(page)?;
    let dir = dir.join("launch");
    sweep(&dir);
    let path = dir.join(format!("{}.html", hex::encode(rand::random::<[u8; 12]>())));
    write(&dir, &path, html.as_bytes()).map_err(|source| LaunchError::Write {
        path: path.clone(),
        source,
    })?;
    let watch = Inotify::init(InitFlags::IN_CLOEXEC | InitFlags::IN_NONBLOCK)
        .ok()
        .filter(|i| i.add_watch(&path, AddWatchFlags::IN_CLOSE_NOWRITE).is_ok())
        .map(Watch);
    // The page's path is one argument, never a shell word; it holds no secret.
    let opener = std::process::Command::new("xdg-open")
        .arg(&path)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    match opener {
        Ok(opener) => Ok(Launched {
            path,
            watch,
            opener: Some(opener),
        }),
        Err(e) => {
            remove(&path);
            Err(LaunchError::Open(e))
        }
    }
}

impl Launched {
    /// Waits (at most `bound`) until the browser has read the page; then the page is
    /// removed. False when it was not read in time, or `xdg-open` failed. Where the read
    /// cannot be watched (no inotify), the page is left for the whole `bound`.
    pub async fn read_within(mut self, bound: Duration) -> bool {
        let Some(watch) = self.watch.take() else {
            tokio::select! {
                () = tokio::time::sleep(bound) => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            return true;
        };
        // SAFETY: `Watch` owns the inotify descriptor for as long as the `AsyncFd` holds
        // it, and always answers that same descriptor.
        let registered = unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(watch, tokio::io::Interest::READABLE)
        };
        let Ok(fd) = registered else {
            return false;
        };
        let deadline = tokio::time::Instant::now() + bound;
        // Ctrl-C or a kill ends the wait, and the page is removed on the way out.
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        let stop = async move {
            match term.as_mut() {
                Some(t) => tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = t.recv() => {}
                },
                None => drop(tokio::signal::ctrl_c().await),
            }
        };
        tokio::pin!(stop);
        loop {
            let ready = tokio::select! {
                r = tokio::time::timeout_at(deadline, fd.readable()) => r,
                () = &mut stop => return false,
            };
            let Ok(Ok(mut guard)) = ready else {
                return false;
            };
            match fd.get_ref().0.read_events() {
                Ok(events) if !events.is_empty() => return true,
                _ => guard.clear_ready(),
            }
            // xdg-open ended without a browser to hand the page to.
            if let Some(Ok(Some(status))) = self.opener.as_mut().map(|c| c.try_wait())
                && !status.success()
            {
                return false;
            }
        }
    }
}

impl Drop for Launched {
    fn drop(&mut self) {
        remove(&self.path);
        // xdg-open returns at once once the browser has the page; reaped off the runtime.
        if let Some(mut child) = self.opener.take()
            && let Ok(None) = child.try_wait()
        {
            std::thread::spawn(move || child.wait());
        }
    }
}

#[allow(
    clippy::disallowed_methods,
    reason = "one small file, written and removed by a short-lived ctl command"
)]
fn write(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    // A directory that was there already is made the user's own again.
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(bytes)
}

/// Launch pages older than this are left from a command that could not remove its own
/// (killed outright): their tokens have expired, and they go.
const STALE: Duration = Duration::from_secs(600);

/// Removes stale launch pages.
#[allow(
    clippy::disallowed_methods,
    reason = "a small directory of small files"
)]
fn sweep(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten().take(1024) {
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > STALE);
        if old {
            remove(&entry.path());
        }
    }
}

#[allow(clippy::disallowed_methods, reason = "removing one small file")]
fn remove(path: &Path) {
    let _ = std::fs::remove_file(path);
}

/// The page: a form posted at once, or a script going to the address, each with a
/// link or button for a browser without scripts.
fn render(page: &Page<'_>) -> Result<String, LaunchError> {
    const HEAD: &str = "<!doctype html><html><head><meta charset=\"utf-8\"><meta name=\"referrer\" content=\"no-referrer\"><title>mcpd</title></head><body>";
    Ok(match page {
        Page::Post { action, fields } => {
            let inputs: String = fields
                .iter()
                .map(|(k, v)| {
                    format!(
                        "<input type=\"hidden\" name=\"{}\" value=\"{}\">",
                        attr(k),
                        attr(v)
                    )
                })
                .collect();
            format!(
                "{HEAD}<form id=\"go\" method=\"post\" action=\"{}\">{inputs}<button>Continue to mcpd</button></form><script>document.getElementById(\"go\").submit()</script></body></html>",
                attr(action)
            )
        }
        Page::Go(url) => {
            if !(url.starts_with("https://") || url.starts_with("http://")) {
                return Err(LaunchError::NotHttp);
            }
            // A JSON string is a script string; `</` is broken so it cannot end the
            // script element.
            let js = serde_json::to_string(url)
                .unwrap_or_default()
                .replace("</", "<\\/");
            format!(
                "{HEAD}<p><a href=\"{}\">Continue</a></p><script>location.replace({js})</script></body></html>",
                attr(url)
            )
        }
    })
}

/// `text` as an HTML attribute value between double quotes.
fn attr(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_launch_page_escapes_what_it_is_given_and_goes_nowhere_but_http() {
        let page = render(&Page::Post {
            action: "http://127.0.0.1:1/login",
            fields: &[("token", "a\"><script>x</script>")],
        })
        .unwrap();
        assert!(page.contains("value=\"a&quot;&gt;&lt;script&gt;x&lt;/script&gt;\""));
        let go = render(&Page::Go("https://as.test/auth?state=s&x=</script>")).unwrap();
        assert!(go.contains("href=\"https://as.test/auth?state=s&amp;x=&lt;/script&gt;\""));
        assert!(go.contains(r#"location.replace("https://as.test/auth?state=s&x=<\/script>")"#));
        assert!(matches!(
            render(&Page::Go("javascript:alert(1)")),
            Err(LaunchError::NotHttp)
        ));
    }
}
