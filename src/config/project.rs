//! Per-project servers (`share = "project"`).
//!
//! The share modes, the `${PROJECT}` and `${PROJECT_NAME}` placeholders of a local
//! server's launch, and their validation.

use super::{ConfigError, RawServer, StdioLaunch, Validator, defaults};
use std::path::Path;
use std::time::Duration;

/// The placeholder for the project's absolute, canonical path.
pub const PROJECT: &str = "${PROJECT}";
/// The placeholder for the project directory's last component.
pub const PROJECT_NAME: &str = "${PROJECT_NAME}";

/// How a server's processes are shared among agents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Share {
    /// One process for every agent.
    Shared,
    /// One process per agent connection (`share = "agent"`).
    Agent,
    /// One process per project, shared by the agents working in it (`share = "project"`).
    Project {
        /// Instances running at once, at most (`max_projects`).
        max_projects: usize,
    },
}

impl Share {
    /// Whether the server runs as instances (per agent or per project), never itself.
    pub fn instanced(self) -> bool {
        self != Share::Shared
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Share::Shared => "shared",
            Share::Agent => "agent",
            Share::Project { .. } => "project",
        }
    }
}

fn has_placeholder(s: &str) -> bool {
    s.contains(PROJECT) || s.contains(PROJECT_NAME)
}

impl StdioLaunch {
    /// The first key (relative to the server's table) whose value names the project.
    pub fn placeholder_key(&self) -> Option<String> {
        if has_placeholder(&self.command) {
            return Some("command".into());
        }
        if let Some(i) = self.args.iter().position(|a| has_placeholder(a)) {
            return Some(format!("args[{i}]"));
        }
        if self
            .cwd
            .as_ref()
            .is_some_and(|c| has_placeholder(&c.to_string_lossy()))
        {
            return Some("cwd".into());
        }
        self.env
            .iter()
            .find(|(_, v)| has_placeholder(v))
            .map(|(k, _)| format!("env.{k}"))
    }

    /// This launch for one project: every `${PROJECT}` and `${PROJECT_NAME}` replaced.
    pub fn instantiate(&self, project: &Path) -> StdioLaunch {
        let path = project.to_string_lossy();
        let name = project
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_else(|| path.clone());
        let fill = |s: &str| s.replace(PROJECT_NAME, &name).replace(PROJECT, &path);
        StdioLaunch {
            command: fill(&self.command),
            args: self.args.iter().map(|a| fill(a)).collect(),
            env: self.env.iter().map(|(k, v)| (k.clone(), fill(v))).collect(),
            cwd: self.cwd.as_ref().map(|c| fill(&c.to_string_lossy()).into()),
        }
    }
}

impl Validator<'_> {
    /// A server table's `share`, `max_projects`, and the project's default idle timeout,
    /// checked against where the placeholders appear.
    pub(super) fn share(
        &self,
        key: &str,
        s: &RawServer,
        launch: &super::Launch,
    ) -> Result<(Share, Option<Duration>), ConfigError> {
        let share = match s.share.as_deref() {
            None | Some("shared") => Share::Shared,
            Some("agent") => Share::Agent,
            Some("project") => Share::Project {
                max_projects: self.positive(
                    &format!("{key}.max_projects"),
                    s.max_projects,
                    defaults::MAX_PROJECTS,
                    1..=defaults::MAX_PROJECTS_LIMIT,
                )?,
            },
            Some(other) => {
                return Err(self.err(
                    format!("{key}.share"),
                    format!(
                        "{other:?} is not a share mode; use \"shared\", \"agent\" or \"project\""
                    ),
                ));
            }
        };
        if s.max_projects.is_some() && !matches!(share, Share::Project { .. }) {
            return Err(self.err(
                format!("{key}.max_projects"),
                "only applies to servers with share = \"project\"",
            ));
        }
        match launch {
            super::Launch::Http(_) => {
                let remote = [("url".to_owned(), s.url.as_deref().unwrap_or_default())]
                    .into_iter()
                    .chain(
                        s.headers
                            .iter()
                            .map(|(k, v)| (format!("headers.{k}"), v.as_str())),
                    );
                if let Some((k, _)) = remote.into_iter().find(|(_, v)| has_placeholder(v)) {
                    return Err(self.err(
                        format!("{key}.{k}"),
                        "${PROJECT} and ${PROJECT_NAME} only apply to local servers (those with `command`)",
                    ));
                }
                if share != Share::Shared && share != Share::Agent {
                    return Err(self.err(
                        format!("{key}.share"),
                        "share = \"project\" only applies to local servers (those with `command`)",
                    ));
                }
            }
            super::Launch::Stdio(l) => match (share, l.placeholder_key()) {
                (Share::Project { .. }, None) => {
                    return Err(self.err(
                        format!("{key}.share"),
                        "share = \"project\" needs ${PROJECT} or ${PROJECT_NAME} in `command`, `args`, `cwd` or `env` (where the server should work)",
                    ));
                }
                (Share::Shared | Share::Agent, Some(k)) => {
                    return Err(self.err(
                        format!("{key}.{k}"),
                        "${PROJECT} and ${PROJECT_NAME} need share = \"project\" (one instance per project)",
                    ));
                }
                _ => {}
            },
        }
        let idle = matches!(share, Share::Project { .. }).then_some(defaults::PROJECT_IDLE);
        Ok((share, idle))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instantiate_fills_every_place_and_both_names() {
        let l = StdioLaunch {
            command: "run-${PROJECT_NAME}".into(),
            args: vec!["--repo".into(), "${PROJECT}".into(), "x".into()],
            env: [("ROOT".to_owned(), "${PROJECT}/src".to_owned())].into(),
            cwd: Some("${PROJECT}".into()),
        };
        assert_eq!(l.placeholder_key().as_deref(), Some("command"));
        let got = l.instantiate(Path::new("/home/u/code/app"));
        assert_eq!(got.command, "run-app");
        assert_eq!(got.args, ["--repo", "/home/u/code/app", "x"]);
        assert_eq!(got.env["ROOT"], "/home/u/code/app/src");
        assert_eq!(got.cwd.as_deref(), Some(Path::new("/home/u/code/app")));
        assert_eq!(got.placeholder_key(), None);
    }
}
