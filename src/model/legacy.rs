//! Record layouts of older store formats, read only to upgrade such a
//! store at open (`storage::store::legacy`), each with its conversion to
//! the current record.

/// The dialogue record of store format versions 5 to 7, whose branches
/// kept the sum of their turns' vectors: read only to upgrade such a
/// store's dialogues at open.
pub mod dialogue_v7 {
    use rkyv::{Archive, Deserialize, Serialize};

    use crate::model::dialogue as current;

    use current::{SummaryPick, Topic, Turn};

    /// A branch as versions 3 to 7 stored it: [`current::Branch`] with the
    /// sum of its turns' unit vectors.
    #[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq)]
    pub struct Branch {
        /// See [`current::Branch::id`].
        pub id: u32,
        /// See [`current::Branch::topic`].
        pub topic: u32,
        /// See [`current::Branch::fork`].
        pub fork: Option<u32>,
        /// See [`current::Branch::turns`].
        pub turns: Vec<u32>,
        /// See [`current::Branch::summary`].
        pub summary: Vec<SummaryPick>,
        /// Sum of its turns' unit vectors, no longer kept.
        pub vector_sum: Vec<f32>,
    }

    impl From<Branch> for current::Branch {
        /// The same branch without its vector sum.
        fn from(old: Branch) -> current::Branch {
            current::Branch {
                id: old.id,
                topic: old.topic,
                fork: old.fork,
                turns: old.turns,
                summary: old.summary,
            }
        }
    }

    /// A dialogue as versions 5 to 7 stored it.
    #[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq)]
    pub struct Dialogue {
        /// See [`current::Dialogue::id`].
        pub id: String,
        /// See [`current::Dialogue::turns`].
        pub turns: Vec<Turn>,
        /// See [`current::Dialogue::topics`].
        pub topics: Vec<Topic>,
        /// Its branches, with their vector sums.
        pub branches: Vec<Branch>,
        /// See [`current::Dialogue::current`].
        pub current: u32,
    }

    impl From<Dialogue> for current::Dialogue {
        /// The same dialogue with no branch vector sums.
        fn from(old: Dialogue) -> current::Dialogue {
            current::Dialogue {
                id: old.id,
                turns: old.turns,
                topics: old.topics,
                branches: old
                    .branches
                    .into_iter()
                    .map(current::Branch::from)
                    .collect(),
                current: old.current,
            }
        }
    }
}

/// The dialogue record of store format versions 3 and 4, whose turns had
/// no time (and whose branches kept vector sums, as [`dialogue_v7`]'s did): read
/// only to upgrade such a store's dialogues at open.
pub mod dialogue_v4 {
    use rkyv::{Archive, Deserialize, Serialize};

    use crate::model::dialogue as current;

    use super::dialogue_v7::Branch;
    use current::{Role, SummaryPick, Topic};

    /// A turn as versions 3 and 4 stored it: [`current::Turn`] without `at`.
    #[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq)]
    pub struct Turn {
        /// See [`current::Turn::number`].
        pub number: u32,
        /// See [`current::Turn::role`].
        pub role: Role,
        /// See [`current::Turn::doc`].
        pub doc: String,
        /// See [`current::Turn::parent`].
        pub parent: Option<u32>,
        /// See [`current::Turn::topic`].
        pub topic: u32,
        /// See [`current::Turn::branch`].
        pub branch: u32,
        /// See [`current::Turn::summary`].
        pub summary: SummaryPick,
        /// See [`current::Turn::edus`].
        pub edus: u32,
        /// See [`current::Turn::bytes`].
        pub bytes: [u32; 2],
        /// See [`current::Turn::tokens`].
        pub tokens: u64,
    }

    /// A dialogue as versions 3 and 4 stored it.
    #[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq)]
    pub struct Dialogue {
        /// See [`current::Dialogue::id`].
        pub id: String,
        /// Its turns, without times.
        pub turns: Vec<Turn>,
        /// See [`current::Dialogue::topics`].
        pub topics: Vec<Topic>,
        /// See [`current::Dialogue::branches`].
        pub branches: Vec<Branch>,
        /// See [`current::Dialogue::current`].
        pub current: u32,
    }

    impl From<Dialogue> for current::Dialogue {
        /// The same dialogue with no turn times and no branch vector sums
        /// (through [`super::dialogue_v7`]'s layout).
        fn from(old: Dialogue) -> current::Dialogue {
            let turns = old
                .turns
                .into_iter()
                .map(|t| current::Turn {
                    number: t.number,
                    role: t.role,
                    doc: t.doc,
                    parent: t.parent,
                    topic: t.topic,
                    branch: t.branch,
                    summary: t.summary,
                    edus: t.edus,
                    bytes: t.bytes,
                    tokens: t.tokens,
                    at: None,
                })
                .collect();
            current::Dialogue::from(super::dialogue_v7::Dialogue {
                id: old.id,
                turns,
                topics: old.topics,
                branches: old.branches,
                current: old.current,
            })
        }
    }
}

/// The DAG record of store format versions 3 to 5, whose points had no
/// written text: read only to upgrade such a store's DAGs at open.
pub mod dag_v5 {
    use rkyv::{Archive, Deserialize, Serialize};

    use crate::model::dag as current;

    use crate::model::edu::Span;

    /// A node as versions 3 to 5 stored it: [`current::DagNode`] without `text`.
    #[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
    pub struct DagNode {
        /// See [`current::DagNode::level`].
        pub level: u16,
        /// See [`current::DagNode::span`].
        pub span: Span,
        /// See [`current::DagNode::points`].
        pub points: Vec<u32>,
        /// See [`current::DagNode::window`].
        pub window: Option<[u32; 2]>,
    }

    /// A DAG as versions 3 to 5 stored it.
    #[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq)]
    pub struct Dag {
        /// Its nodes, without written text.
        pub nodes: Vec<DagNode>,
        /// See [`current::Dag::offsets`].
        pub offsets: Vec<u32>,
        /// See [`current::Dag::targets`].
        pub targets: Vec<u32>,
        /// See [`current::Dag::weights`].
        pub weights: Vec<f32>,
    }

    impl From<Dag> for current::Dag {
        fn from(old: Dag) -> current::Dag {
            current::Dag {
                nodes: (old.nodes.into_iter())
                    .map(|n| current::DagNode {
                        level: n.level,
                        span: n.span,
                        points: n.points,
                        window: n.window,
                        text: None,
                    })
                    .collect(),
                offsets: old.offsets,
                targets: old.targets,
                weights: old.weights,
            }
        }
    }
}
