//! What a session remembers of each persona ([`AgentState`]), by persona: a list kept sorted by persona, saved as
//! the JSON object a `BTreeMap` made. A session names a handful of personas, and a B-tree's first node has room for
//! eleven: some 800 bytes per session, idle or not (measured with 10,000 saved sessions of three personas), against
//! under 300 here.

use super::AgentState;
use crate::core::ids::PersonaId;
use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Each persona's state, sorted by persona, each persona once.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Agents(Vec<(PersonaId, AgentState)>);

/// A persona's place in [`Agents`], to fill in if it has none.
pub struct Entry<'a> {
    agents: &'a mut Agents,
    persona: PersonaId,
}

impl<'a> Entry<'a> {
    /// The persona's state, a default one inserted first if it has none.
    pub fn or_default(self) -> &'a mut AgentState {
        let Entry { agents, persona } = self;
        let at = match agents.find(&persona) {
            Ok(at) => at,
            Err(at) => {
                agents.0.insert(at, (persona, AgentState::default()));
                at
            }
        };
        &mut agents.0[at].1
    }
}

impl Agents {
    fn find(&self, persona: &PersonaId) -> Result<usize, usize> {
        self.0.binary_search_by(|(p, _)| p.cmp(persona))
    }

    pub fn get(&self, persona: &PersonaId) -> Option<&AgentState> {
        self.find(persona).ok().map(|at| &self.0[at].1)
    }

    pub fn get_mut(&mut self, persona: &PersonaId) -> Option<&mut AgentState> {
        self.find(persona).ok().map(|at| &mut self.0[at].1)
    }

    pub fn contains_key(&self, persona: &PersonaId) -> bool {
        self.find(persona).is_ok()
    }

    pub fn entry(&mut self, persona: PersonaId) -> Entry<'_> {
        Entry { agents: self, persona }
    }

    /// The personas and their states, in the personas' order.
    pub fn iter(&self) -> impl Iterator<Item = (&PersonaId, &AgentState)> {
        self.0.iter().map(|(p, a)| (p, a))
    }

    pub fn values(&self) -> impl Iterator<Item = &AgentState> {
        self.0.iter().map(|(_, a)| a)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(super) fn shrink_to_fit(&mut self) {
        self.0.shrink_to_fit();
    }

    /// Sets a persona's state; the last one given wins, as in a map.
    fn insert(&mut self, persona: PersonaId, state: AgentState) {
        match self.find(&persona) {
            Ok(at) => self.0[at].1 = state,
            Err(at) => self.0.insert(at, (persona, state)),
        }
    }
}

impl std::ops::Index<&PersonaId> for Agents {
    type Output = AgentState;

    fn index(&self, persona: &PersonaId) -> &AgentState {
        self.get(persona).expect("no such persona in the session")
    }
}

impl FromIterator<(PersonaId, AgentState)> for Agents {
    fn from_iter<I: IntoIterator<Item = (PersonaId, AgentState)>>(iter: I) -> Self {
        let mut agents = Agents::default();
        for (persona, state) in iter {
            agents.insert(persona, state);
        }
        agents
    }
}

impl std::fmt::Debug for Agents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Serialize for Agents {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (persona, state) in &self.0 {
            map.serialize_entry(persona, state)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Agents {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct AgentsVisitor;

        impl<'de> Visitor<'de> for AgentsVisitor {
            type Value = Agents;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a map from persona to its state")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Agents, A::Error> {
                let mut agents = Agents(Vec::with_capacity(map.size_hint().unwrap_or(0).min(64)));
                while let Some((persona, state)) = map.next_entry::<PersonaId, AgentState>()? {
                    agents.insert(persona, state);
                }
                agents.shrink_to_fit();
                Ok(agents)
            }
        }

        deserializer.deserialize_map(AgentsVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn id(name: &str) -> PersonaId {
        PersonaId::parse(name).unwrap()
    }

    fn state(timeouts: u32) -> AgentState {
        AgentState { consecutive_timeouts: timeouts, ..AgentState::default() }
    }

    #[test]
    fn the_agents_are_saved_and_read_as_the_map_they_replace_byte_for_byte() {
        let map: BTreeMap<PersonaId, AgentState> =
            [(id("pm"), state(1)), (id("critic"), state(0)), (id("dev"), state(2))].into_iter().collect();
        let agents: Agents = map.clone().into_iter().collect();
        assert_eq!(serde_json::to_string(&agents).unwrap(), serde_json::to_string(&map).unwrap());
        let json = serde_json::to_string(&map).unwrap();
        let read: Agents = serde_json::from_str(&json).unwrap();
        assert_eq!(read, agents);
        assert_eq!(format!("{read:?}"), format!("{map:?}"));
        let empty: Agents = serde_json::from_str("{}").unwrap();
        assert!(empty.is_empty());
    }

    #[test]
    fn a_persona_is_found_and_filled_in_as_in_a_map_each_once_in_order() {
        let mut agents = Agents::default();
        agents.entry(id("pm")).or_default().consecutive_timeouts = 1;
        agents.entry(id("dev")).or_default().benched = true;
        agents.entry(id("pm")).or_default().consecutive_timeouts += 1;
        assert_eq!(agents.len(), 2);
        assert_eq!(agents[&id("pm")].consecutive_timeouts, 2);
        assert!(agents.get(&id("dev")).is_some_and(|a| a.benched));
        assert!(agents.get(&id("critic")).is_none() && !agents.contains_key(&id("critic")));
        let order: Vec<&str> = agents.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(order, ["dev", "pm"]);
        assert_eq!(agents.values().filter(|a| a.benched).count(), 1);
    }

    #[test]
    fn a_persona_given_twice_in_a_file_keeps_its_last_state_as_a_map_did() {
        let json = r#"{"pm":{"consecutiveTimeouts":1},"pm":{"consecutiveTimeouts":3}}"#;
        let read: Agents = serde_json::from_str(json).unwrap();
        let map: BTreeMap<PersonaId, AgentState> = serde_json::from_str(json).unwrap();
        assert_eq!(read.len(), 1);
        assert_eq!(read[&id("pm")], map[&id("pm")]);
    }
}
