//! Signal grammar tests: rules, priorities, anchoring, invisible characters, configuration errors.
