//! The search tree every strategy records into: one node per step (a span of generated text),
//! edges from a step to its continuations. The root is the prompt.
//!
//! Strategies keep their own working state (beams, frontiers, visit counts) and record here
//! what they generated and how they judged it, so that every search, whatever its algorithm,
//! returns a tree a person (or the API's `return_trace`) can inspect. Node ids are assigned in
//! insertion order, so with a seed a search's tree is identical across runs.

use petgraph::stable_graph::{NodeIndex, StableDiGraph};
use petgraph::visit::EdgeRef;
use petgraph::Direction;
use serde::{Deserialize, Serialize};

/// A node's id: its insertion index.
pub type NodeId = usize;

/// Where a node stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum NodeStatus {
    /// Generated, may be expanded.
    Open,
    /// Has children.
    Expanded,
    /// A complete solution.
    Finished,
    /// Dropped by the strategy (low score, low confidence, lost a vote).
    Pruned,
    /// Cut short by the budget, a deadline or a token cap.
    Truncated,
}

/// One step of a solution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Node {
    /// Insertion index.
    #[cfg_attr(feature = "openapi", schema(value_type = usize))]
    pub id: NodeId,
    /// Parent step (`None` for the root).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<usize>))]
    pub parent: Option<NodeId>,
    /// Depth in steps (root = 0).
    pub depth: usize,
    /// The text this step added.
    pub text: String,
    /// Tokens generated for this step.
    pub tokens: usize,
    /// The step's score from the verifier (or confidence), if scored.
    pub score: Option<f32>,
    /// Mean token logprob of the step.
    pub mean_logprob: Option<f32>,
    /// The answer extracted at this node, for finished nodes and probes.
    pub answer: Option<String>,
    /// Status.
    pub status: NodeStatus,
    /// Strategy-specific annotations (visits, value, f-score, group…).
    #[serde(skip_serializing_if = "serde_json::Map::is_empty", default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub notes: serde_json::Map<String, serde_json::Value>,
}

/// The tree of one search.
#[derive(Debug, Clone)]
pub struct SearchTree {
    graph: StableDiGraph<Node, ()>,
}

impl Default for SearchTree {
    fn default() -> Self {
        Self::new()
    }
}

impl SearchTree {
    /// A tree holding only the root (the prompt).
    pub fn new() -> Self {
        let mut graph = StableDiGraph::new();
        graph.add_node(Node {
            id: 0,
            parent: None,
            depth: 0,
            text: String::new(),
            tokens: 0,
            score: None,
            mean_logprob: None,
            answer: None,
            status: NodeStatus::Expanded,
            notes: serde_json::Map::new(),
        });
        Self { graph }
    }

    /// The root's id.
    pub const ROOT: NodeId = 0;

    /// Adds a step under `parent` and returns its id. An unknown parent attaches to the root.
    pub fn add(
        &mut self,
        parent: NodeId,
        text: &str,
        tokens: usize,
        mean_logprob: Option<f32>,
    ) -> NodeId {
        let parent = if self.graph.contains_node(NodeIndex::new(parent)) {
            parent
        } else {
            Self::ROOT
        };
        let depth = self.graph[NodeIndex::new(parent)].depth + 1;
        let id = self.graph.node_count();
        let idx = self.graph.add_node(Node {
            id,
            parent: Some(parent),
            depth,
            text: text.to_string(),
            tokens,
            score: None,
            mean_logprob,
            answer: None,
            status: NodeStatus::Open,
            notes: serde_json::Map::new(),
        });
        self.graph.add_edge(NodeIndex::new(parent), idx, ());
        if let Some(p) = self.graph.node_weight_mut(NodeIndex::new(parent)) {
            if p.status == NodeStatus::Open {
                p.status = NodeStatus::Expanded;
            }
        }
        id
    }

    /// The node `id`, if it exists.
    pub fn get(&self, id: NodeId) -> Option<&Node> {
        self.graph.node_weight(NodeIndex::new(id))
    }

    /// Mutable access to node `id`.
    pub fn get_mut(&mut self, id: NodeId) -> Option<&mut Node> {
        self.graph.node_weight_mut(NodeIndex::new(id))
    }

    /// Sets a node's score.
    pub fn set_score(&mut self, id: NodeId, score: f32) {
        if let Some(n) = self.get_mut(id) {
            n.score = Some(score);
        }
    }

    /// Sets a node's status.
    pub fn set_status(&mut self, id: NodeId, status: NodeStatus) {
        if let Some(n) = self.get_mut(id) {
            n.status = status;
        }
    }

    /// Records a strategy-specific annotation on a node.
    pub fn note(&mut self, id: NodeId, key: &str, value: impl Into<serde_json::Value>) {
        if let Some(n) = self.get_mut(id) {
            n.notes.insert(key.to_string(), value.into());
        }
    }

    /// Children of `id` in insertion order.
    pub fn children(&self, id: NodeId) -> Vec<NodeId> {
        let mut c: Vec<NodeId> = self
            .graph
            .edges_directed(NodeIndex::new(id), Direction::Outgoing)
            .map(|e| e.target().index())
            .collect();
        c.sort_unstable();
        c
    }

    /// Node ids from the root's first child down to `id`.
    pub fn path(&self, id: NodeId) -> Vec<NodeId> {
        let mut path = Vec::new();
        let mut cur = Some(id);
        while let Some(n) = cur.and_then(|i| self.get(i)) {
            if n.id != Self::ROOT {
                path.push(n.id);
            }
            cur = n.parent;
        }
        path.reverse();
        path
    }

    /// The steps' texts from the root down to `id`.
    pub fn steps(&self, id: NodeId) -> Vec<String> {
        self.path(id)
            .into_iter()
            .filter_map(|i| self.get(i).map(|n| n.text.clone()))
            .collect()
    }

    /// The whole solution text from the root down to `id`.
    pub fn text(&self, id: NodeId) -> String {
        self.steps(id).concat()
    }

    /// Number of nodes, root included.
    pub fn len(&self) -> usize {
        self.graph.node_count()
    }

    /// Whether the tree holds only its root.
    pub fn is_empty(&self) -> bool {
        self.len() <= 1
    }

    /// All nodes in id order.
    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.graph.node_indices().map(|i| &self.graph[i])
    }

    /// Tokens generated from the root down to `id`.
    pub fn path_tokens(&self, id: NodeId) -> usize {
        self.path(id)
            .into_iter()
            .filter_map(|i| self.get(i).map(|n| n.tokens))
            .sum()
    }

    /// The solution that got furthest: the node with the most generated tokens from the root
    /// down to it (ties: the higher score, then the earlier node); `None` when nothing was
    /// generated. What a search that ended before recording any candidate answers with.
    pub fn furthest(&self) -> Option<NodeId> {
        self.nodes()
            .filter(|n| n.id != Self::ROOT)
            .map(|n| {
                let score = n.score.unwrap_or(f32::NEG_INFINITY);
                (self.path_tokens(n.id), score, n.id)
            })
            .filter(|(t, _, _)| *t > 0)
            .max_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)).then(b.2.cmp(&a.2)))
            .map(|(_, _, id)| id)
    }

    /// A compact, indented text view (one line per node) for the CLI.
    pub fn render(&self, max_text: usize) -> String {
        let mut out = String::new();
        self.render_into(Self::ROOT, max_text, &mut out);
        out
    }

    fn render_into(&self, id: NodeId, max_text: usize, out: &mut String) {
        let Some(n) = self.get(id) else { return };
        if id == Self::ROOT {
            out.push_str("(prompt)\n");
        } else {
            let snippet: String = n
                .text
                .trim()
                .replace('\n', " ⏎ ")
                .chars()
                .take(max_text)
                .collect();
            let score = n
                .score
                .map(|s| format!(" score={s:.3}"))
                .unwrap_or_default();
            let answer = n
                .answer
                .as_deref()
                .map(|a| format!(" answer={a}"))
                .unwrap_or_default();
            out.push_str(&format!(
                "{}#{} [{:?}] {}t{}{} {}\n",
                "  ".repeat(n.depth),
                n.id,
                n.status,
                n.tokens,
                score,
                answer,
                snippet
            ));
        }
        for c in self.children(id) {
            self.render_into(c, max_text, out);
        }
    }
}

impl Serialize for SearchTree {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Flat<'a> {
            nodes: Vec<&'a Node>,
        }
        Flat {
            nodes: self.nodes().collect(),
        }
        .serialize(s)
    }
}

/// The schema of what [`SearchTree`]'s `Serialize` writes: `{"nodes": [Node, …]}`.
#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for SearchTree {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder};
        ObjectBuilder::new()
            .description(Some(
                "The search tree: its nodes in insertion order (the root first).",
            ))
            .property(
                "nodes",
                ArrayBuilder::new().items(utoipa::openapi::Ref::from_schema_name("Node")),
            )
            .required("nodes")
            .into()
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for SearchTree {
    fn schemas(
        schemas: &mut Vec<(
            String,
            utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>,
        )>,
    ) {
        use utoipa::PartialSchema;
        schemas.push(("Node".into(), Node::schema()));
        <Node as utoipa::ToSchema>::schemas(schemas);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_text_follow_parents() {
        let mut t = SearchTree::new();
        let a = t.add(SearchTree::ROOT, "a ", 1, None);
        let b = t.add(a, "b ", 1, None);
        let c = t.add(a, "c", 1, None);
        assert_eq!(t.path(b), vec![a, b]);
        assert_eq!(t.text(c), "a c");
        assert_eq!(t.children(a), vec![b, c]);
        assert_eq!(t.get(c).map(|n| n.depth), Some(2));
        assert_eq!(t.get(a).map(|n| n.status), Some(NodeStatus::Expanded));
        let json = serde_json::to_value(&t).unwrap_or_default();
        assert_eq!(json["nodes"].as_array().map(Vec::len), Some(4));
    }
}
