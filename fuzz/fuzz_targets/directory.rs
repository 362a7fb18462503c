//! The identity directory (`directory.toml`, managed layer only). When it parses: every team a
//! person names exists; `team_members` and `role_members` include both the table's members and
//! the people naming the group; `is_admin` agrees with `admins`; parsing is deterministic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use warrant_core::Coded;
use warrant_core::directory::Directory;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let dir = match Directory::parse("/etc/warrant/directory.toml", text) {
        Ok(dir) => dir,
        Err(e) => {
            assert_eq!(e.code(), "W-CONFIG-021");
            assert!(!e.to_string().is_empty());
            return;
        }
    };
    assert_eq!(Directory::parse("/etc/warrant/directory.toml", text).ok(), Some(dir.clone()));
    for (actor, person) in &dir.people {
        for team in &person.teams {
            assert!(dir.teams.contains_key(team), "{actor} names missing team {team}");
            assert!(dir.team_members(team).contains(actor));
        }
        for role in &person.roles {
            assert!(dir.role_members(role).contains(actor));
        }
    }
    for (name, team) in &dir.teams {
        let members = dir.team_members(name);
        assert!(team.members.iter().all(|m| members.contains(m)));
    }
    for (name, role) in &dir.roles {
        let members = dir.role_members(name);
        assert!(role.members.iter().all(|m| members.contains(m)));
    }
    let admins = dir.admins();
    for a in &dir.admins {
        assert!(dir.is_admin(a));
    }
    for a in &admins {
        assert!(dir.is_admin(a));
    }
    for actor in dir.people.keys() {
        assert_eq!(dir.is_admin(actor), admins.contains(actor));
    }
    let mut stranger = "stranger".to_owned();
    while admins.contains(&stranger) {
        stranger.push('_');
    }
    assert!(!dir.is_admin(&stranger), "an actor outside the directory is an admin");
});
