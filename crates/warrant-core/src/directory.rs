//! The identity directory: people, teams, roles and the administrators, read from the managed
//! layer only (`directory.toml` beside the managed `config.toml`), so no project or user can
//! make itself an approver. Pure: the CLI reads the file, this module parses and answers
//! "who is asked" and "may this person answer".

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// `directory.toml`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Directory {
    /// Actors who administer Warrant here; asked when nobody else is.
    #[serde(default)]
    pub admins: Vec<String>,
    /// `[people.<actor>]`: a person's teams and roles.
    #[serde(default)]
    pub people: BTreeMap<String, Person>,
    /// `[teams.<name>]`: members (in addition to people naming the team).
    #[serde(default)]
    pub teams: BTreeMap<String, Team>,
    /// `[roles.<name>]`: members (in addition to people naming the role).
    #[serde(default)]
    pub roles: BTreeMap<String, Team>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Person {
    #[serde(default)]
    pub teams: Vec<String>,
    #[serde(default)]
    pub roles: Vec<String>,
    /// Hex Ed25519 public key of the person's approver key (reserved; proofs are HMAC today).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_key: Option<String>,
    /// When the approver key expires (`2027-06-30` or an RFC 3339 time): `warrant config check`
    /// reports it expired after that, and expiring in the 30 days before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_expires: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Team {
    #[serde(default)]
    pub members: Vec<String>,
    /// `[teams.<name>] roles`: roles the team's members hold on the team's own projects (a
    /// workspace whose `[approvals] team` is this team) and nowhere else. Not allowed in a
    /// `[roles.<name>]` table.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<String>,
}

/// A person's standing in the directory as policy sees it on one project: their roles (their
/// own, the role tables listing them, and their teams' roles when the project is that team's),
/// their teams, and their approver key. A run records the standing of the person it acts for
/// when it starts; a later standing that lost any of it stops the run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Standing {
    pub person: String,
    pub roles: BTreeSet<String>,
    pub teams: BTreeSet<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_key: Option<String>,
}

impl Standing {
    /// What `now` lost against `self`, in words; `None` when nothing was lost (gaining a role
    /// or a team stops nothing). `now` is `None` when the person left the directory.
    pub fn lost_in(&self, now: Option<&Standing>) -> Option<String> {
        let Some(now) = now else {
            return Some(format!(
                "{} is no longer in the identity directory",
                self.person
            ));
        };
        let mut lost = Vec::new();
        let roles: Vec<&str> = self
            .roles
            .difference(&now.roles)
            .map(String::as_str)
            .collect();
        if !roles.is_empty() {
            lost.push(format!("lost the role(s) {}", roles.join(", ")));
        }
        let teams: Vec<&str> = self
            .teams
            .difference(&now.teams)
            .map(String::as_str)
            .collect();
        if !teams.is_empty() {
            lost.push(format!("left the team(s) {}", teams.join(", ")));
        }
        if self.public_key.is_some() && self.public_key != now.public_key {
            lost.push("their approver key was removed or replaced".to_owned());
        }
        (!lost.is_empty()).then(|| format!("{} {}", self.person, lost.join("; ")))
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("identity directory {path} is malformed: {message}")]
pub struct DirectoryError {
    pub path: String,
    pub message: String,
}

impl crate::Coded for DirectoryError {
    fn code(&self) -> &'static str {
        "W-CONFIG-021"
    }
}

impl Directory {
    pub fn parse(path: &str, text: &str) -> Result<Self, DirectoryError> {
        let dir: Directory = toml::from_str(text).map_err(|e| DirectoryError {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        for (actor, p) in &dir.people {
            for t in &p.teams {
                if !dir.teams.contains_key(t) {
                    return Err(DirectoryError {
                        path: path.to_owned(),
                        message: format!(
                            "people.{actor} names team `{t}`, which has no [teams.{t}] table"
                        ),
                    });
                }
            }
        }
        for (role, t) in &dir.roles {
            if !t.roles.is_empty() {
                return Err(DirectoryError {
                    path: path.to_owned(),
                    message: format!(
                        "roles.{role} has `roles`: only a team's table may give roles (to its members, on its projects)"
                    ),
                });
            }
        }
        Ok(dir)
    }

    /// Whether `actor` is in the directory at all: a person, a member of a team or a role, or
    /// an administrator.
    pub fn knows(&self, actor: &str) -> bool {
        self.people.contains_key(actor)
            || self.admins.iter().any(|a| a == actor)
            || self
                .teams
                .values()
                .chain(self.roles.values())
                .any(|t| t.members.iter().any(|m| m == actor))
    }

    /// `actor`'s standing on a project owned by `project_team` (`None`: a project of no
    /// team, where no team's roles count). `None` when the directory does not know them.
    pub fn standing(&self, actor: &str, project_team: Option<&str>) -> Option<Standing> {
        if !self.knows(actor) {
            return None;
        }
        let teams: BTreeSet<String> = self
            .teams
            .keys()
            .filter(|t| self.team_members(t).contains(actor))
            .cloned()
            .collect();
        let mut roles: BTreeSet<String> = self
            .roles
            .keys()
            .filter(|r| self.role_members(r).contains(actor))
            .cloned()
            .collect();
        if let Some(p) = self.people.get(actor) {
            roles.extend(p.roles.iter().cloned());
        }
        if let Some(project) = project_team
            && teams.contains(project)
            && let Some(team) = self.teams.get(project)
        {
            roles.extend(team.roles.iter().cloned());
        }
        Some(Standing {
            person: actor.to_owned(),
            roles,
            teams,
            public_key: self.people.get(actor).and_then(|p| p.public_key.clone()),
        })
    }

    /// Everyone in `team`: its listed members and the people naming it.
    pub fn team_members(&self, team: &str) -> BTreeSet<String> {
        let mut out: BTreeSet<String> = self
            .teams
            .get(team)
            .map(|t| t.members.iter().cloned().collect())
            .unwrap_or_default();
        for (actor, p) in &self.people {
            if p.teams.iter().any(|t| t == team) {
                out.insert(actor.clone());
            }
        }
        out
    }

    /// Everyone holding `role`.
    pub fn role_members(&self, role: &str) -> BTreeSet<String> {
        let mut out: BTreeSet<String> = self
            .roles
            .get(role)
            .map(|t| t.members.iter().cloned().collect())
            .unwrap_or_default();
        for (actor, p) in &self.people {
            if p.roles.iter().any(|r| r == role) {
                out.insert(actor.clone());
            }
        }
        out
    }

    pub fn is_admin(&self, actor: &str) -> bool {
        self.admins.iter().any(|a| a == actor) || self.role_members("admins").contains(actor)
    }

    pub fn admins(&self) -> BTreeSet<String> {
        let mut out: BTreeSet<String> = self.admins.iter().cloned().collect();
        out.extend(self.role_members("admins"));
        out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn members_come_from_teams_and_people() {
        let d = Directory::parse(
            "d.toml",
            r#"
admins = ["root"]
[people.alice]
teams = ["payments"]
[people.carol]
roles = ["admins"]
[teams.payments]
members = ["bob"]
"#,
        )
        .unwrap();
        assert_eq!(
            d.team_members("payments").into_iter().collect::<Vec<_>>(),
            vec!["alice".to_owned(), "bob".to_owned()]
        );
        assert_eq!(
            d.admins().into_iter().collect::<Vec<_>>(),
            vec!["carol".to_owned(), "root".to_owned()]
        );
        assert!(d.team_members("nobody").is_empty());
        let err = Directory::parse("d.toml", "[people.x]\nteams = [\"ghost\"]\n").unwrap_err();
        assert!(err.message.contains("ghost"), "{err}");
        assert!(Directory::parse("d.toml", "admin = []").is_err());
    }
}
