//! One MCP session's state, and the decisions made from it: the requests
//! in flight ([`PendingSet`]), the tools and tasks the session remembers,
//! [`Calls`] (the handle both directions share) and [`AnswerRelay`] (the
//! server's side, fed bytes). No I/O here: `proxy` drives these as threads
//! over streams ([`crate::proxy::Session`]), a gateway from its own loop.
//! Re-exported from `proxy`, where their public names live.

use crate::framing;
use crate::gate::RequestGate;
use crate::guard::RequestFacts;
use crate::jsonrpc;
use crate::mcp::{CallInfo, McpLimits, Projector, Treat};
#[cfg(doc)]
use crate::proxy::{run, Session};
use crate::proxy::{LogLevel, ProxyConfig};
use crate::sniff::{self, unquote, Event, Seg, Walker, Want, CURSOR_CAP, NAME_BYTES, NAME_CAP};
use std::borrow::Cow;
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Method {
    /// A call of this tool (shared with its count in [`PendingSet`]).
    ToolsCall(Arc<str>),
    /// `tasks/result` for this task id (raw JSON).
    TasksResult(Arc<[u8]>),
    ToolsList,
    /// A `tools/list` the proxy sent itself (its answer is not forwarded).
    ProxyToolsList,
    Other,
}

/// What the proxy knows of the server's tools, and where its own listing
/// of them stands.
#[derive(Debug, Default)]
pub(crate) struct ToolsState {
    /// A complete `tools/list` was seen (or fetching was given up).
    pub(crate) known: bool,
    /// The id of the session's own `tools/list` the server has yet to answer.
    pub(crate) asked: Option<Vec<u8>>,
    /// Pages the session asked for since the tools were last not known.
    pub(crate) pages: u32,
    /// `nextCursor` of the last page the session fetched: the next to ask for.
    pub(crate) next_cursor: Option<Vec<u8>>,
    /// Its own requests the session sent so far (never reset): the last
    /// part of the next one's id, so that no two are alike.
    pub(crate) sent: u64,
}

/// A number for the ids of one session's own requests that a client cannot
/// guess: the client never reads those requests nor their answers, and a
/// request of the client's with the same id would take the answer meant for
/// the other (std's hasher keys are random per process and differ per
/// `RandomState`).
fn own_id_nonce() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
}

/// The most pages of its own `tools/list` a session asks for in a row; then
/// the tools count as known. Protects: the session against a server whose
/// cursors never end.
pub(crate) const MAX_TOOL_PAGES: u32 = 100;

#[derive(Debug, Clone)]
pub(crate) struct Pending {
    pub(crate) method: Method,
    pub(crate) cancelled: bool,
    /// The request carried the 2026-07-28 protocol-version `_meta`.
    pub(crate) modern: bool,
    /// A task-augmented `tools/call` (its result comes later from `tasks/result`).
    pub(crate) task: bool,
}

/// What a pending call's treatment is made from: its tool (a `tasks/result`
/// by its task, whose tool is looked up when the answer comes) and whether it
/// spoke the 2026-07-28 protocol.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum CallKey {
    Tool(Arc<str>, bool),
    Task(Arc<[u8]>, bool),
}

impl CallKey {
    /// The tool and protocol generation the treatment is made from; a task's
    /// tool from `task_tools` (none while the task is unknown).
    pub(crate) fn tool<'a>(&'a self, task_tools: &'a TaskTools) -> (Option<&'a str>, bool) {
        match self {
            CallKey::Tool(name, modern) => (Some(&name[..]), *modern),
            CallKey::Task(task, modern) => (task_tools.get(&task[..]).map(String::as_str), *modern),
        }
    }
}

/// The requests the server has yet to answer, by id, with counts kept as they
/// come and go, so that the start of each answer ([`pick_treat`]) costs the
/// same however many calls are in flight.
///
/// Ids are found by value ([`sniff::id_key`]): a server that parsed the id and
/// wrote it again may have spelled it otherwise (`"a\u0062"` as `"ab"`, `7.0`
/// as `7`), and an answer the client matches to its call must be found as
/// that call's. Failing that, an integer is found in its other type (`"7"`
/// for `7`, and back), as both SDK clients match it. The methods take an id
/// in either side's spelling; what comes back is the client's.
#[derive(Debug, Default)]
pub(crate) struct PendingSet {
    /// Each request by [`sniff::id_key`] of its id, with the order it was sent
    /// in (`seq`) and the id as the client wrote it where that differs.
    pub(crate) by_id: HashMap<Vec<u8>, PendingEntry>,
    pub(crate) seq: u64,
    /// Pending calls by what their treatment is made from.
    pub(crate) calls: HashMap<CallKey, usize>,
    /// Pending `tools/list` requests (the client's and the proxy's own).
    pub(crate) lists: usize,
    /// Pending task-augmented calls.
    pub(crate) tasks: usize,
    /// Pending requests that are not calls (cancelled ones too).
    pub(crate) others: usize,
    /// Calls the client cancelled: the server may never answer them (the
    /// TypeScript SDK's servers do not), so they do not count in `calls`.
    pub(crate) cancelled_calls: usize,
    /// Cancelled requests of every kind, for [`MAX_CANCELLED`].
    pub(crate) cancelled: usize,
    /// Buffers of settled requests' ids, for new requests' keys
    /// ([`PendingSet::key_for`], [`PendingSet::remove_into`]).
    pub(crate) spare_keys: Vec<Vec<u8>>,
    /// The tool names of the last calls, shared by the calls that name them
    /// again ([`PendingSet::name`]).
    pub(crate) names: Vec<Arc<str>>,
}

/// Buffers [`PendingSet`] keeps for ids to come, each of at most
/// [`SPARE_KEY_BYTES`] bytes. With them a call and its answer allocate
/// nothing for the id in the steady state. Bounds what the set keeps of
/// settled ids (16 KiB); does not bound the ids in flight.
pub(crate) const SPARE_KEYS: usize = 64;
pub(crate) const SPARE_KEY_BYTES: usize = 256;

/// Tool names [`PendingSet`] keeps for calls to come (the last ones used),
/// each of at most [`SPARE_KEY_BYTES`] bytes: a gateway calls a few tools
/// over and over, and each call then shares its name. Bounds what the set
/// keeps of names no call in flight uses (4 KiB).
pub(crate) const NAMES: usize = 16;

/// Cancelled requests kept for a late answer; past this, the oldest of them
/// is forgotten for each new one (its late answer then passes as an unknown
/// message). Protects: the proxy's memory in a long session against a
/// server that never answers cancelled requests.
pub(crate) const MAX_CANCELLED: usize = 10_000;

/// A request in [`PendingSet`].
#[derive(Debug)]
pub(crate) struct PendingEntry {
    pub(crate) seq: u64,
    /// The client's spelling of the id, when it is not the key.
    pub(crate) raw: Option<Vec<u8>>,
    pub(crate) p: Pending,
}

impl PendingEntry {
    /// The id as the client wrote it.
    pub(crate) fn id<'a>(&'a self, key: &'a [u8]) -> &'a [u8] {
        self.raw.as_deref().unwrap_or(key)
    }
}

impl PendingSet {
    /// The key `id` (raw JSON, either side's spelling) is pending under.
    pub(crate) fn find<'a>(&self, id: &'a [u8]) -> Option<Cow<'a, [u8]>> {
        let key = sniff::id_key(id);
        if self.by_id.contains_key(&*key) {
            return Some(key);
        }
        let alt = sniff::id_alt(&key)?;
        self.by_id.contains_key(&alt).then_some(Cow::Owned(alt))
    }

    /// The call's key: the name is shared, not copied, so counting a call in
    /// and out allocates nothing.
    pub(crate) fn key(p: &Pending) -> Option<CallKey> {
        match &p.method {
            Method::ToolsCall(name) => Some(CallKey::Tool(name.clone(), p.modern)),
            Method::TasksResult(task) => Some(CallKey::Task(task.clone(), p.modern)),
            _ => None,
        }
    }

    /// Count `p` in (`add`) or out of the summary.
    pub(crate) fn count(&mut self, p: &Pending, add: bool) {
        let step = |n: &mut usize| {
            *n = if add {
                n.saturating_add(1)
            } else {
                n.saturating_sub(1)
            }
        };
        if p.task {
            step(&mut self.tasks);
        }
        if p.cancelled {
            step(&mut self.cancelled);
        }
        match Self::key(p) {
            Some(_) if p.cancelled => step(&mut self.cancelled_calls),
            Some(k) if add => *self.calls.entry(k).or_insert(0) += 1,
            Some(k) => {
                // One lookup, where finding the count and then removing it
                // at zero took two (a keyed hash of the tool's name each).
                if let Entry::Occupied(mut n) = self.calls.entry(k) {
                    *n.get_mut() -= 1;
                    if *n.get() == 0 {
                        n.remove();
                    }
                }
            }
            None => {
                if matches!(p.method, Method::ToolsList | Method::ProxyToolsList) {
                    step(&mut self.lists);
                }
                step(&mut self.others);
            }
        }
    }

    /// Note request `id` (the client's raw JSON) as pending.
    pub(crate) fn insert(&mut self, id: Vec<u8>, p: Pending) {
        self.count(&p, true);
        self.seq += 1;
        let (key, raw) = match sniff::id_key(&id) {
            Cow::Owned(key) => (key, Some(id)),
            Cow::Borrowed(_) => (id, None),
        };
        let entry = PendingEntry {
            seq: self.seq,
            raw,
            p,
        };
        if let Some(old) = self.by_id.insert(key, entry) {
            // A reused id (by value): the new request replaces the old one.
            self.count(&old.p, false);
        }
    }

    /// `id` as a new request's key ([`PendingSet::insert`]), in a spare
    /// buffer where the set has one.
    pub(crate) fn key_for(&mut self, id: &[u8]) -> Vec<u8> {
        refill(self.spare_keys.pop().unwrap_or_default(), id)
    }

    /// A call's tool name, shared with the last calls that named it.
    pub(crate) fn name(&mut self, tool: &str) -> Arc<str> {
        if let Some(n) = self.names.iter().find(|n| ***n == *tool) {
            return n.clone();
        }
        let n: Arc<str> = tool.into();
        if tool.len() <= SPARE_KEY_BYTES {
            if self.names.len() >= NAMES {
                self.names.remove(0);
            }
            // Its whole room at once: the list never grows after.
            self.names.reserve_exact(NAMES - self.names.len());
            self.names.push(n.clone());
        }
        n
    }

    /// [`PendingSet::remove`], with the id as the client wrote it in `into`
    /// (its buffer traded for the one the set held, kept for a new key).
    pub(crate) fn remove_into(&mut self, id: &[u8], into: &mut Vec<u8>) -> Option<Pending> {
        let (mut raw, p) = self.remove(id)?;
        std::mem::swap(into, &mut raw);
        if self.spare_keys.len() < SPARE_KEYS && (1..=SPARE_KEY_BYTES).contains(&raw.capacity()) {
            // Its whole room at once: the list never grows after.
            self.spare_keys
                .reserve_exact(SPARE_KEYS - self.spare_keys.len());
            self.spare_keys.push(raw);
        }
        Some(p)
    }

    /// The request `id` answers, with the id as the client wrote it.
    pub(crate) fn remove(&mut self, id: &[u8]) -> Option<(Vec<u8>, Pending)> {
        // The map's own key is handed back: nothing is copied. The id's own
        // key is tried first, by one lookup, as [`PendingSet::find`] would.
        let key = sniff::id_key(id);
        let (key, e) = match self.by_id.remove_entry(&*key) {
            Some(found) => found,
            None => self.by_id.remove_entry(&sniff::id_alt(&key)?)?,
        };
        self.count(&e.p, false);
        Some((e.raw.unwrap_or(key), e.p))
    }

    /// Every request, with the ids as the client wrote them.
    pub(crate) fn drain(&mut self) -> Vec<(Vec<u8>, Pending)> {
        self.calls.clear();
        (self.lists, self.tasks, self.others) = (0, 0, 0);
        (self.cancelled_calls, self.cancelled) = (0, 0);
        // In the order they were sent, so what is answered for them (the
        // server exited) comes in that order too.
        let mut all: Vec<(Vec<u8>, PendingEntry)> = self.by_id.drain().collect();
        all.sort_unstable_by_key(|(_, e)| e.seq);
        all.into_iter()
            .map(|(key, e)| (e.raw.unwrap_or(key), e.p))
            .collect()
    }

    pub(crate) fn get(&self, id: &[u8]) -> Option<&Pending> {
        let key = self.find(id)?;
        self.by_id.get(&*key).map(|e| &e.p)
    }

    /// The client cancelled request `id`: it stays for a late answer, but a
    /// cancelled call no longer decides the treatment of other answers.
    pub(crate) fn cancel(&mut self, id: &[u8]) {
        let Some(key) = self.find(id).map(Cow::into_owned) else {
            return;
        };
        let id = key.as_slice();
        // (By its key: `find` has already matched the spelling.)
        let Some(p) = self
            .by_id
            .get(id)
            .map(|e| &e.p)
            .filter(|p| !p.cancelled)
            .cloned()
        else {
            return;
        };
        self.count(&p, false);
        let p = Pending {
            cancelled: true,
            ..p
        };
        self.count(&p, true);
        if let Some(slot) = self.by_id.get_mut(id) {
            slot.p = p;
        }
        if self.cancelled > MAX_CANCELLED {
            // The oldest other cancelled request is forgotten.
            let old = self
                .by_id
                .iter()
                .filter(|(k, e)| e.p.cancelled && k.as_slice() != id)
                .min_by_key(|(_, e)| e.seq)
                .map(|(k, _)| k.clone());
            if let Some(k) = old {
                self.remove(&k);
            }
        }
    }

    /// Every request, with the ids as the client wrote them.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&[u8], &Pending)> {
        self.by_id.iter().map(|(k, e)| (e.id(k), &e.p))
    }
}

/// A map that remembers at most `CAP` keys, the oldest forgotten first (a
/// key seen again keeps its place and takes the new value).
#[derive(Debug)]
pub(crate) struct Remembered<K, V, const CAP: usize> {
    pub(crate) by_key: HashMap<K, V>,
    pub(crate) order: std::collections::VecDeque<K>,
}

impl<K, V, const CAP: usize> Default for Remembered<K, V, CAP> {
    fn default() -> Self {
        Remembered {
            by_key: HashMap::new(),
            order: std::collections::VecDeque::new(),
        }
    }
}

impl<K: std::hash::Hash + Eq + Clone, V, const CAP: usize> Remembered<K, V, CAP> {
    pub(crate) fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        K: std::borrow::Borrow<Q>,
        Q: std::hash::Hash + Eq + ?Sized,
    {
        self.by_key.get(key)
    }

    pub(crate) fn insert(&mut self, key: K, value: V) {
        if let Some(v) = self.by_key.get_mut(&key) {
            *v = value;
            return;
        }
        if self.order.len() >= CAP {
            if let Some(old) = self.order.pop_front() {
                self.by_key.remove(&old);
            }
        }
        self.order.push_back(key.clone());
        self.by_key.insert(key, value);
    }
}

/// Tasks the proxy saw created, and the tool each one runs; at most
/// [`MAX_TASKS`], the oldest forgotten first (a `tasks/result` for a forgotten
/// task gets the global budget, untyped, as one for a task never seen).
/// Protects: the proxy's memory in a long session of task-augmented calls.
pub(crate) type TaskTools = Remembered<Vec<u8>, String, MAX_TASKS>;

pub(crate) const MAX_TASKS: usize = 10_000;

/// What `tools/list` answers taught the proxy about each tool; at most
/// [`MAX_TOOLS`] names, the oldest learned forgotten first (a call of a
/// forgotten tool is treated as one of a tool never listed: untyped, not
/// read-only, unless the inventory says otherwise). Protects: the proxy's
/// memory against a server whose listings never end (every page may name
/// 100,000 tools of up to [`sniff::NAME_BYTES`] bytes, and each
/// `list_changed` asks for more).
/// Does not bound: a page's own names while it is read (100,000 at most).
pub(crate) type ToolTable = Remembered<String, ToolFacts, MAX_TOOLS>;

pub(crate) const MAX_TOOLS: usize = 100_000;

/// What `tools/list` told us about a tool (an inventory row overrides both).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ToolFacts {
    /// It declares an `outputSchema`: a result cut past its budget would no
    /// longer match it, so the answer becomes a `result_budget_exceeded` error.
    pub typed: bool,
    /// Its `readOnlyHint` annotation is `true`: that error asks for less.
    /// Otherwise it says the call may have changed state, not to repeat it,
    /// and carries a receipt.
    pub read_only: bool,
}

/// Where a session's log lines go, when not to stderr.
pub(crate) type LogSink = Box<dyn Fn(LogLevel, &str) + Send + Sync>;

/// One session's state, shared by its two directions ([`Calls`]).
pub(crate) struct Shared {
    pub(crate) cfg: ProxyConfig,
    /// `None`: stderr, as `resultbudget[level]: message`.
    pub(crate) log_sink: RwLock<Option<LogSink>>,
    pub(crate) pending: Mutex<PendingSet>,
    pub(crate) tools: Mutex<ToolTable>,
    /// Task id (raw JSON) → the tool whose result `tasks/result` will carry.
    pub(crate) tasks: Mutex<TaskTools>,
    pub(crate) tools_state: Mutex<ToolsState>,
    pub(crate) tools_cv: Condvar,
    /// How the ids of the session's own requests begin (a quote, then
    /// `resultbudget-tools-`, then [`own_id_nonce`] in 16 hex digits and a
    /// `-`): an answer whose id begins so is never the client's.
    pub(crate) own_prefix: Vec<u8>,
}

/// The lock, whether or not a holder panicked (the state it guards is left
/// consistent between statements).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

impl Shared {
    /// Fresh state for one session.
    pub(crate) fn new(cfg: ProxyConfig) -> Shared {
        Shared {
            cfg,
            log_sink: RwLock::new(None),
            pending: Mutex::new(PendingSet::default()),
            tools: Mutex::new(ToolTable::default()),
            tasks: Mutex::new(TaskTools::default()),
            tools_state: Mutex::new(ToolsState::default()),
            tools_cv: Condvar::new(),
            own_prefix: format!("\"resultbudget-tools-{:016x}-", own_id_nonce()).into_bytes(),
        }
    }

    /// The session's next `tools/list` of its own (its id and its line),
    /// noted in flight; `None` when the tools are known or one is in flight.
    pub(crate) fn tools_request(&self, version: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
        let mut st = lock(&self.tools_state);
        if st.known || st.asked.is_some() {
            return None;
        }
        if st.pages >= MAX_TOOL_PAGES {
            st.known = true;
            return None;
        }
        // An id no request of the client's has: one it cannot guess (a
        // number of this session's own, then a count that never repeats,
        // so a late answer to a listing given up on is not taken for the
        // next), and, should it have been guessed, none in flight.
        let mut pending = lock(&self.pending);
        let id = loop {
            let mut id = self.own_prefix.clone();
            id.extend_from_slice(format!("{}\"", st.sent).as_bytes());
            st.sent += 1;
            if pending.get(&id).is_none() {
                break id;
            }
        };
        let mut line = Vec::with_capacity(256);
        line.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
        line.extend_from_slice(&id);
        line.extend_from_slice(b",\"method\":\"tools/list\",\"params\":{");
        let cursor = st.next_cursor.take();
        if let Some(c) = &cursor {
            line.extend_from_slice(b"\"cursor\":");
            line.extend_from_slice(c);
        }
        if !version.is_empty() {
            if cursor.is_some() {
                line.push(b',');
            }
            line.extend_from_slice(b"\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":");
            line.extend_from_slice(version);
            line.extend_from_slice(b",\"io.modelcontextprotocol/clientCapabilities\":{}}");
        }
        line.extend_from_slice(b"}}\n");
        st.pages += 1;
        st.asked = Some(id.clone());
        // In flight before it is written (and `asked` names it, so its
        // answer is known for the session's own however soon it comes).
        // (The one place both locks are held: the tools' state, then the
        // requests in flight.)
        pending.insert(
            id.clone(),
            Pending {
                method: Method::ProxyToolsList,
                cancelled: false,
                modern: !version.is_empty(),
                task: false,
            },
        );
        Some((id, line))
    }

    /// Whether `id` (raw JSON, as an answer writes it) is one of the
    /// session's own requests', in any spelling.
    pub(crate) fn is_own_id(&self, id: &[u8]) -> bool {
        sniff::canonical(id).starts_with(&self.own_prefix)
    }

    /// The session's own `tools/list` `id` was answered (or will not be):
    /// the next page is `next_cursor`; none left, the tools are known.
    pub(crate) fn own_tools_answered(&self, id: &[u8], next_cursor: Option<Vec<u8>>) {
        let mut st = lock(&self.tools_state);
        // (A late answer to a request given up on names no request in flight.)
        if st
            .asked
            .as_deref()
            .is_some_and(|a| sniff::id_key(a) == sniff::id_key(id))
        {
            st.asked = None;
            st.next_cursor = next_cursor;
            if st.next_cursor.is_none() {
                st.known = true;
            }
        }
        drop(st);
        self.tools_cv.notify_all();
    }

    /// Stop fetching the tools: what is known of them is all there is.
    pub(crate) fn tools_given_up(&self) {
        let mut st = lock(&self.tools_state);
        st.known = true;
        st.asked = None;
        st.next_cursor = None;
        drop(st);
        self.tools_cv.notify_all();
    }

    /// The server said its tools changed: list them again before the next call.
    pub(crate) fn tools_changed(&self) {
        let mut st = lock(&self.tools_state);
        st.known = false;
        st.pages = 0;
        st.next_cursor = None;
    }

    /// Whether a message at `level` is written ([`Shared::log`]).
    pub(crate) fn logs(&self, level: LogLevel) -> bool {
        level <= self.cfg.log_level
    }

    pub(crate) fn log(&self, level: LogLevel, msg: &str) {
        if self.logs(level) {
            let sink = match self.log_sink.read() {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            if let Some(sink) = sink.as_ref() {
                sink(level, msg);
                return;
            }
            let tag = match level {
                LogLevel::Error => "error",
                LogLevel::Warn => "warn",
                LogLevel::Info => "info",
                LogLevel::Debug => "debug",
            };
            eprintln!("resultbudget[{tag}]: {msg}");
        }
    }

    /// How to treat a response to a request with this method. The tool's
    /// name and the request's id are copied into `spare`'s buffers (a spent
    /// treatment's, [`Spare::keep`]).
    pub(crate) fn treat_for(
        &self,
        id: &[u8],
        p: &Pending,
        spare: &mut Spare,
    ) -> (McpLimits, Treat) {
        let mut lim = self.cfg.limits;
        // A tasks/result carries the result of the task's tool: same treatment.
        let tool = match &p.method {
            Method::ToolsCall(name) => Some(spare.tool(name)),
            Method::TasksResult(task) => lock(&self.tasks).get(&task[..]).map(|n| spare.tool(n)),
            _ => None,
        };
        match (&p.method, tool) {
            (Method::ToolsCall(_) | Method::TasksResult(_), Some(name)) => {
                let facts = lock(&self.tools).get(&name).copied().unwrap_or_default();
                let mut typed = facts.typed;
                let mut read_only = facts.read_only;
                if let Some(inv) = &self.cfg.inventory {
                    if let Some(row) = inv.row(&name) {
                        lim = row.apply_result_limits(lim);
                        if let Some(t) = row.typed() {
                            typed = t;
                        }
                        if let Some(r) = row.read_only() {
                            read_only = r;
                        }
                    }
                }
                (
                    lim,
                    Treat::ToolResult(CallInfo {
                        tool: Some(name),
                        typed,
                        read_only,
                        request_id: Some(spare.id(id)),
                        modern: p.modern,
                    }),
                )
            }
            (Method::ToolsCall(_) | Method::TasksResult(_), None) => (
                lim,
                Treat::ToolResult(CallInfo {
                    tool: None,
                    typed: false,
                    read_only: true,
                    request_id: Some(spare.id(id)),
                    modern: p.modern,
                }),
            ),
            (Method::ToolsList | Method::ProxyToolsList | Method::Other, _) => (lim, Treat::Pass),
        }
    }
}

/// `bytes` in `buf`, a buffer kept from an earlier use (its old contents
/// dropped, its room kept): what the session's spare buffers are refilled
/// by.
fn refill(mut buf: Vec<u8>, bytes: &[u8]) -> Vec<u8> {
    buf.clear();
    buf.extend_from_slice(bytes);
    buf
}

/// The buffers of a spent treatment (its tool's name and request id),
/// which [`Shared::treat_for`] fills for the next one: the server's side of
/// a session then builds each answer's treatment in memory it already
/// holds, and a small answer allocates nothing (`tests/no_alloc.rs`).
#[derive(Debug, Default)]
pub(crate) struct Spare {
    tool: String,
    id: Vec<u8>,
}

impl Spare {
    /// `name`, in the spare name buffer.
    fn tool(&mut self, name: &str) -> String {
        let mut s = std::mem::take(&mut self.tool);
        s.clear();
        s.push_str(name);
        s
    }

    /// `id`, in the spare id buffer.
    fn id(&mut self, id: &[u8]) -> Vec<u8> {
        refill(std::mem::take(&mut self.id), id)
    }

    /// Take back the buffers of a treatment that is done with.
    pub(crate) fn keep(&mut self, t: Treat) {
        if let Treat::ToolResult(c) = t {
            if let Some(s) = c.tool {
                self.tool = s;
            }
            if let Some(v) = c.request_id {
                self.id = v;
            }
        }
    }
}

/// One MCP session's knowledge, shared by its two directions: the requests
/// in flight, the tools the server listed, the tasks it created. The client's
/// side notes each request it forwards ([`Calls::note`]); the server's side
/// ([`AnswerRelay`]) budgets each answer by the call it answers and learns from
/// the answers it reads. A clone is another handle on the same session.
///
/// This is the proxy's own logic (`docs/proxy.md`), fed bytes instead of
/// reading them: [`Session`] and `resultbudget proxy` run it on threads, a
/// gateway with its own event loop calls it directly.
///
/// Bounds: the remembered tools, tasks and cancelled requests (the oldest are
/// forgotten past 100,000, 10,000 and 10,000). Does not bound: the number of
/// requests in flight (each is answered, or answered with an error when
/// the server's output ends).
#[derive(Clone)]
pub struct Calls(pub(crate) Arc<Shared>);

impl Calls {
    /// A fresh session with these settings (`grace` is [`run`]'s alone).
    pub fn new(cfg: ProxyConfig) -> Calls {
        Calls(Arc::new(Shared::new(cfg)))
    }

    /// Send log lines at [`ProxyConfig::log_level`] or above to `log`
    /// instead of stderr (both directions, every handle).
    pub fn set_log(&self, log: impl Fn(LogLevel, &str) + Send + Sync + 'static) {
        let mut sink = match self.0.log_sink.write() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        *sink = Some(Box::new(log));
    }

    /// Tell the session what the server's tools are (a gateway that keeps its
    /// own registry): their facts take the place of what [`Session`] would
    /// learn from its own `tools/list`, and it sends none until the server says
    /// its list changed. Listings the client asks for still teach the session.
    pub fn set_known_tools<'a>(&self, tools: impl IntoIterator<Item = (&'a str, ToolFacts)>) {
        let mut table = lock(&self.0.tools);
        for (name, facts) in tools {
            table.insert(name.to_owned(), facts);
        }
        drop(table);
        lock(&self.0.tools_state).known = true;
    }

    /// Whether the session knows the server's tools: a complete listing was
    /// read (the client's or its own), [`Calls::set_known_tools`] told it, or
    /// fetching was given up; until the server says its list changed.
    pub fn tools_known(&self) -> bool {
        lock(&self.0.tools_state).known
    }

    /// The session's own `tools/list`, for the server to read before the
    /// next `tools/call` goes on, so that the typed tools are known even to a
    /// client that never lists them ([`Session`] does this itself): the line
    /// and its newline, already noted in flight. `None` once the tools are
    /// known, and while the last such request is unanswered. Its answer,
    /// read by the [`AnswerRelay`], is never the client's; a listing of
    /// several pages asks again here for each (at most 100). `version` is
    /// the call's protocol-version `_meta`, as the gate read it
    /// (`RequestFacts::version`; empty for none).
    ///
    /// A gateway holds the call until [`Calls::tools_known`], or until it
    /// will wait no longer ([`Calls::give_up_tools`]; `Session` waits 3 s).
    pub fn tools_request(&self, version: &[u8]) -> Option<Vec<u8>> {
        self.0.tools_request(version).map(|(_, line)| line)
    }

    /// Stop waiting for the server's tools: what the session knows of them
    /// is taken as all there is (a late answer still teaches it), until the
    /// server says its list changed.
    pub fn give_up_tools(&self) {
        self.0.tools_given_up();
    }

    /// A request gate set up as this session's client side checks requests:
    /// the guard, the inventory and the reading of lone surrogates of its
    /// [`ProxyConfig`].
    pub fn gate(&self) -> RequestGate {
        let cfg = &self.0.cfg;
        let mut guard = cfg.guard.clone();
        guard.set_inventory(cfg.inventory.clone());
        guard.set_lone_surrogates(cfg.lone_surrogates);
        RequestGate::with_guard(guard)
    }

    /// Note a line the client sent that goes on to the server (a gate's
    /// [`Fate::Forward`](crate::gate::Fate::Forward)): a request is then in flight, to be answered; a
    /// `notifications/cancelled` marks its request cancelled. `facts` and
    /// `tool` are the gate's ([`RequestGate::facts`], [`RequestGate::tool`]).
    /// Call it before the line's last byte goes to the server, so no answer
    /// can come first.
    pub fn note(&self, facts: &RequestFacts, tool: &str) {
        register(&self.0, facts, tool);
    }

    /// The server's side of the session: fed the server's bytes, it writes
    /// what the client is to read. One per server stream.
    pub fn answers(&self) -> Result<AnswerRelay, String> {
        AnswerRelay::new(self.clone())
    }
}

/// Note a forwarded request as pending; `tool` is a call's tool name.
pub(crate) fn register(shared: &Shared, f: &RequestFacts, tool: &str) {
    if !f.has_method() {
        return;
    }
    // The method as the request wrote it (quoted raw JSON).
    let method = f.method.as_slice();
    if f.id.is_empty() {
        if method == b"\"notifications/cancelled\"" && !f.request_id.is_empty() {
            lock(&shared.pending).cancel(&f.request_id);
        }
        return;
    }
    if shared.logs(LogLevel::Debug) {
        shared.log(
            LogLevel::Debug,
            &format!(
                "pending {} {}",
                String::from_utf8_lossy(&f.id),
                unquote(method)
            ),
        );
    }
    // The name and the key in memory the set keeps (steady state: nothing
    // allocated).
    let mut pending = lock(&shared.pending);
    let m = match method {
        b"\"tools/call\"" => Method::ToolsCall(pending.name(tool)),
        b"\"tasks/result\"" => Method::TasksResult(f.task_id.as_slice().into()),
        b"\"tools/list\"" => Method::ToolsList,
        _ => Method::Other,
    };
    let key = pending.key_for(&f.id);
    pending.insert(
        key,
        Pending {
            method: m,
            cancelled: false,
            modern: !f.version.is_empty(),
            task: f.task,
        },
    );
}

/// How the server's side of a [`Session`] ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerEnd {
    /// The server's output ended in the middle of a line: it was dropped,
    /// or, had it begun to stream, ended there ([`AnswerRelay::finish`]).
    pub broken_line: bool,
    /// Requests of the client's that the server never answered; each was
    /// answered to the client with a JSON-RPC error.
    pub orphaned: usize,
}

/// Reads one scalar at a fixed key path out of a streaming message (the
/// envelope `id`, a `CreateTaskResult`'s `result.task.taskId`), skipping the rest.
///
/// A member given twice has two values; which one the probe keeps is fixed
/// ([`ScalarProbe::last`]), so that the value does not depend on where the
/// reads split the line (fed whole, a probe that kept whatever it read last
/// in one call kept the second `id`; fed in pieces, it had stopped at the
/// first).
pub(crate) struct ScalarProbe {
    pub(crate) path: &'static [&'static [u8]],
    /// Keep the last value read (as a reader keeps the last of duplicate
    /// members), reading every byte fed; else the first, and nothing after
    /// it.
    last: bool,
    pub(crate) walker: Walker,
    pub(crate) value: Option<Vec<u8>>,
    /// The buffer of a value read and let go ([`ScalarProbe::reset`]),
    /// for the next one.
    spare: Vec<u8>,
    pub(crate) failed: bool,
}

impl ScalarProbe {
    pub(crate) fn new(path: &'static [&'static [u8]], last: bool) -> ScalarProbe {
        ScalarProbe {
            path,
            last,
            walker: Walker::new(),
            value: None,
            spare: Vec::new(),
            failed: false,
        }
    }

    /// The envelope's `id`: the first, which picks a line's treatment as
    /// soon as it is read. (A line that gives it twice is dropped as
    /// malformed; when the projector kept no `id` of it, the request this
    /// one names is told.)
    pub(crate) fn id() -> ScalarProbe {
        ScalarProbe::new(&[b"id"], false)
    }

    /// A task-augmented call's task id: the last, the one the client reads
    /// and asks `tasks/result` for.
    pub(crate) fn task_id() -> ScalarProbe {
        ScalarProbe::new(&[b"result", b"task", b"taskId"], true)
    }

    /// Ready for the next line, keeping the walker's buffers and the value's.
    pub(crate) fn reset(&mut self) {
        self.walker.reset();
        if let Some(v) = self.value.take() {
            self.spare = v;
        }
        self.failed = false;
    }

    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        if self.failed || (!self.last && self.value.is_some()) {
            return;
        }
        let last = self.last;
        let target = self.path;
        let on_path = |path: &[Seg]| {
            path.len() <= target.len() && path.iter().zip(target).all(|(s, k)| s.is(k))
        };
        let mut decide = |path: &[Seg]| match (on_path(path), path.len() == target.len()) {
            (true, true) => Want::Capture,
            (true, false) => Want::Descend,
            _ => Want::Skip,
        };
        let (value, spare) = (&mut self.value, &mut self.spare);
        let mut on = |ev: Event<'_>| {
            if let Event::Scalar(path, raw) = ev {
                if path.len() == target.len() && on_path(path) && (last || value.is_none()) {
                    // A value read again reuses the buffer of the one it replaces.
                    let buf = value.take().unwrap_or_else(|| std::mem::take(spare));
                    *value = Some(refill(buf, raw));
                }
            }
        };
        if self.walker.feed(bytes, &mut decide, &mut on).is_err() {
            self.failed = true;
        }
    }
}

/// Learns tools from a `tools/list` result.
#[derive(Default)]
pub(crate) struct ToolsProbe {
    pub(crate) walker: Walker,
    pub(crate) next_cursor: Option<Vec<u8>>,
    pub(crate) found: Vec<(String, ToolFacts)>,
    pub(crate) cur_name: Option<String>,
    pub(crate) cur: ToolFacts,
    pub(crate) failed: bool,
}

impl ToolsProbe {
    pub(crate) fn feed(&mut self, bytes: &[u8], last: bool) {
        if self.failed {
            return;
        }
        let mut decide = |path: &[Seg]| match path {
            [r] if r.is(b"result") => Want::Descend,
            [r, t] if r.is(b"result") && t.is(b"tools") => Want::Descend,
            [r, c] if r.is(b"result") && c.is(b"nextCursor") => Want::CaptureUpTo(CURSOR_CAP),
            [_, _, i] if i.index.is_some() => Want::Descend,
            [_, _, _, k] if k.is(b"name") => Want::CaptureUpTo(NAME_CAP),
            // An object: descending into it is how its presence is seen.
            [_, _, _, k] if k.is(b"outputSchema") => Want::Descend,
            [_, _, _, k] if k.is(b"annotations") => Want::Descend,
            [_, _, _, a, k] if a.is(b"annotations") && k.is(b"readOnlyHint") => Want::Capture,
            _ => Want::Skip,
        };
        let found = &mut self.found;
        let next_cursor = &mut self.next_cursor;
        let cur_name = &mut self.cur_name;
        let cur = &mut self.cur;
        let mut on = |ev: Event<'_>| match ev {
            Event::Enter([r, t, i], true)
                if r.is(b"result") && t.is(b"tools") && i.index.is_some() =>
            {
                *cur_name = None;
                *cur = ToolFacts::default();
            }
            Event::Leave([r, t, i]) if r.is(b"result") && t.is(b"tools") && i.index.is_some() => {
                if let Some(n) = cur_name.take() {
                    if found.len() < MAX_TOOLS {
                        found.push((n, *cur));
                    }
                }
            }
            Event::Scalar([r, c], raw)
                if r.is(b"result") && c.is(b"nextCursor") && raw != b"null" =>
            {
                *next_cursor = Some(raw.to_vec());
            }
            // (One longer than the session keeps ends the listing here.)
            Event::Untaken([r, c]) if r.is(b"result") && c.is(b"nextCursor") => {
                *next_cursor = None;
            }
            Event::Enter([_, _, _, k], true) if k.is(b"outputSchema") => cur.typed = true,
            // (A name longer than MCP allows teaches nothing: the last
            // `name` is the entry's, so an earlier one does not count.)
            Event::Scalar([_, _, _, k], raw) if k.is(b"name") => {
                *cur_name = Some(unquote(raw)).filter(|n| n.len() <= NAME_BYTES);
            }
            Event::Untaken([_, _, _, k]) if k.is(b"name") => *cur_name = None,
            Event::Scalar([_, _, _, a, k], raw)
                if a.is(b"annotations") && k.is(b"readOnlyHint") =>
            {
                cur.read_only = raw == b"true";
            }
            _ => {}
        };
        let r = if last {
            self.walker.finish(&mut decide, &mut on)
        } else {
            self.walker.feed(bytes, &mut decide, &mut on)
        };
        if r.is_err() {
            self.failed = true;
        }
    }
}

/// The server's side of a session ([`Calls::answers`]), fed the server's
/// bytes as they come: each line is budgeted by the request it answers (the
/// pending calls pick its treatment, or a bounded look-ahead for its `id`),
/// repeated or broken answers are dropped and the call they answer gets an
/// error, `tools/list` answers teach the session its tools and a task's
/// creation its tool. What the client is to read is appended to `out`.
///
/// Any split of the input gives the same output, but for how much of a
/// long pass-through line had streamed on before it broke.
///
/// Bounds: a line's output held before it goes to `out` (its budget, or
/// [`ProxyConfig::max_hold`] for a line not budgeted), the look-ahead
/// ([`ProxyConfig::lookahead`]). Does not bound: `out` (the caller takes
/// it; it grows by what one call to `feed` finishes).
pub struct AnswerRelay {
    calls: Calls,
    proj: Projector,
    /// The current line's output not yet in `out`.
    line_out: Vec<u8>,
    /// The line's bytes read ahead while its treatment waits for its id.
    look: Vec<u8>,
    probe: ScalarProbe,
    /// The buffers of the last line's treatment, for the next one's.
    spare: Spare,
    /// The id of the request the last line answered, as the client wrote it.
    answered: Vec<u8>,
    tools_probe: Option<ToolsProbe>,
    /// Reads a task-augmented call's answer for its task id, on lines
    /// begun while such a call was pending (`tasks_on`); kept from line to
    /// line, with its buffers.
    task_probe: ScalarProbe,
    tasks_on: bool,
    /// The current line has begun (its treatment was picked).
    started: bool,
    /// Bytes of the current line were fed since the last newline.
    in_line: bool,
    /// The treatment waits for the line's id.
    deciding: bool,
    /// Part of the current line is in `out` already.
    streaming_out: bool,
    /// Once the current line outgrew the hold and its id was read: whether
    /// it answers one of the session's own requests, so that its bytes are
    /// let go as they come (`None` until then).
    own_past_hold: Option<bool>,
    /// Why the line is dropped: it is not valid JSON, or it answers twice.
    failed: Option<String>,
    in_bytes: u64,
    /// The line's first byte that is not whitespace: a message is an
    /// object (`None`: a blank line so far).
    first: Option<u8>,
}

impl AnswerRelay {
    pub(crate) fn new(calls: Calls) -> Result<AnswerRelay, String> {
        let cfg = &calls.0.cfg;
        let lone = cfg.lone_surrogates;
        let mut proj = Projector::new(cfg.limits)?;
        proj.set_lone_surrogates(lone);
        let mut probe = ScalarProbe::id();
        probe.walker.set_lone_surrogates(lone);
        let mut task_probe = ScalarProbe::task_id();
        task_probe.walker.set_lone_surrogates(lone);
        Ok(AnswerRelay {
            calls,
            proj,
            line_out: Vec::with_capacity(256 * 1024),
            look: Vec::new(),
            probe,
            spare: Spare::default(),
            answered: Vec::new(),
            tools_probe: None,
            task_probe,
            tasks_on: false,
            started: false,
            in_line: false,
            deciding: false,
            streaming_out: false,
            own_past_hold: None,
            failed: None,
            in_bytes: 0,
            first: None,
        })
    }

    /// Whether `out` ends inside a line: a long pass-through line began to
    /// stream on ([`ProxyConfig::max_hold`]) and its end has not come. A
    /// gateway that writes lines of its own to the client (a gate's
    /// refusal, [`crate::gate::Fate::Dropped`]) holds them until this is
    /// false again, or they land inside that line and the client can read
    /// neither.
    pub fn mid_line(&self) -> bool {
        self.streaming_out
    }

    /// Feed the server's `bytes`; what the client is to read is appended to
    /// `out`.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<u8>) {
        // With no batch to stop at, one call uses every byte.
        self.feed_until(bytes, out, usize::MAX);
    }

    /// As [`Self::feed`], but returns at the end of a line once `out` holds
    /// `batch` bytes or more: how many of `bytes` were used.
    pub(crate) fn feed_until(&mut self, bytes: &[u8], out: &mut Vec<u8>, batch: usize) -> usize {
        let mut rest = bytes;
        while !rest.is_empty() {
            let (piece, after, ended) = framing::split_line(rest);
            // (As `LineReader` hands on a line: no empty piece before its end.)
            if !piece.is_empty() {
                self.in_line = true;
                self.step(piece, false, out);
            }
            rest = after;
            if !ended {
                break;
            }
            self.in_line = false;
            self.step(&[], true, out);
            if out.len() >= batch {
                break;
            }
        }
        bytes.len() - rest.len()
    }

    /// The server's output ended: a line it left without its newline is
    /// dropped, or, if part of it went on already, ended there as its
    /// newline would have ended it (the client reads one line, and the
    /// request it answers is settled by it: by the answer if it is whole,
    /// else by an error). Then every request still in flight is answered
    /// with an error, in the order it was sent. The relay is then empty;
    /// feeding it more starts a new stream.
    pub fn finish(&mut self, out: &mut Vec<u8>) -> ServerEnd {
        let mut end = ServerEnd::default();
        if self.in_line {
            end.broken_line = true;
            self.calls.0.log(
                LogLevel::Error,
                "the server's output ended in the middle of a line",
            );
            if self.streaming_out {
                // What went out is ended as a line, so the errors owed
                // below are lines the client can read, and no request is
                // answered twice: by the line, and below.
                self.step(&[], true, out);
            }
        }
        self.reset_line();
        self.in_line = false;
        let shared = &*self.calls.0;
        // The server is gone: answer everything still pending.
        let pending: Vec<(Vec<u8>, Pending)> = lock(&shared.pending).drain();
        for (id, p) in pending {
            // A cancelled call is not waited for; the proxy's own `tools/list` is
            // not the client's (whoever waits for it stops waiting).
            if p.method == Method::ProxyToolsList {
                shared.own_tools_answered(&id, None);
                continue;
            }
            if p.cancelled {
                continue;
            }
            end.orphaned += 1;
            out.extend_from_slice(&jsonrpc::error_reply(
                Some(&id),
                jsonrpc::INTERNAL_ERROR,
                "resultbudget: the MCP server exited before answering this request",
            ));
        }
        end
    }

    /// One piece of a line (never holding its newline), or its end.
    pub(crate) fn step(&mut self, bytes: &[u8], end: bool, out: &mut Vec<u8>) {
        let shared = &*self.calls.0;
        let lone = shared.cfg.lone_surrogates;
        if !self.started {
            self.started = true;
            self.spare.keep(self.proj.take_treat());
            let pick = pick_treat(shared, &mut self.spare);
            self.deciding = pick.ambiguous;
            if !self.deciding {
                begin(shared, &mut self.proj, pick.treat);
            }
            self.tools_probe = pick.lists.then(|| {
                let mut tp = ToolsProbe::default();
                tp.walker.set_lone_surrogates(lone);
                tp
            });
            self.tasks_on = pick.tasks;
        }
        if self.first.is_none() {
            self.first = framing::first_content(bytes);
            // A batch (a JSON array) or a bare value is not a message: no
            // client reads one as the answer to a call, and a batch answers
            // only a client batch, which the proxy never forwards. Dropped as
            // stray output is, before any of it is written.
            if self.failed.is_none() && framing::not_one_object(self.first) {
                self.failed =
                    Some("it is not one JSON-RPC message (a batch, or a bare value)".into());
            }
        }
        self.in_bytes += bytes.len() as u64;
        if let Some(tp) = self.tools_probe.as_mut() {
            tp.feed(bytes, false);
        }
        if self.tasks_on {
            self.task_probe.feed(bytes);
        }
        if self.deciding {
            // The probe reads the line's first `lookahead` bytes and no more, so
            // whether the id is found does not depend on where the reads split it.
            let room = shared.cfg.lookahead.saturating_sub(self.look.len());
            self.probe.feed(bytes.get(..room).unwrap_or(bytes));
            self.look.extend_from_slice(bytes);
            let resolved = self
                .probe
                .value
                .as_deref()
                .map(|id| resolve(shared, id, &mut self.spare))
                .or_else(|| {
                    (self.look.len() >= shared.cfg.lookahead || end || self.probe.failed)
                        .then(|| fallback_treat(shared))
                });
            if let Some(t) = resolved {
                self.deciding = false;
                begin(shared, &mut self.proj, t);
                if self.failed.is_none() {
                    if let Err(e) = self.proj.feed(&self.look, &mut self.line_out) {
                        self.failed = Some(e.to_string());
                    }
                }
                self.look.clear();
            }
        } else if self.failed.is_none() {
            if let Err(e) = self.proj.feed(bytes, &mut self.line_out) {
                self.failed = Some(e.to_string());
            }
        }
        // Not one answer (`Projector::repeated`): a reader keeps the last of
        // duplicate members, so an answer with a second `id` may answer
        // another request than its first `id` (which picked its treatment)
        // names, and one with a second `result` or `error` be read by
        // another than the one the projector kept. No SDK writes either; the
        // line is dropped as soon as it shows it, before the member that
        // shows it is written on. It is still read to its end, so its last
        // `id` names the request answered however the reads split it.
        if self.proj.repeated().is_some() {
            self.line_out.clear();
        }
        // An answer to one of the session's own requests, known so by its
        // id before it is whole, is never the client's: what the hold
        // would stream on is let go instead (the tools probe reads the
        // line apart from it). One whose id shows only once it streams
        // (written after the hold) is let go from there: the client reads
        // the part that went out, ended as a line, and not the whole id.
        if self.own_past_hold.is_none()
            && (self.streaming_out || self.line_out.len() > shared.cfg.max_hold)
            && !self.proj.has_method()
        {
            // (Not a request of the client's in flight by that id: one
            // that guessed the session's number keeps its answer.)
            if let Some(id) = self.proj.id().or(self.probe.value.as_deref()) {
                self.own_past_hold = Some(
                    shared.is_own_id(id)
                        && lock(&shared.pending)
                            .get(id)
                            .is_none_or(|p| p.method == Method::ProxyToolsList),
                );
            }
        }
        let dropping_own = self.own_past_hold == Some(true);
        if dropping_own {
            self.line_out.clear();
        }
        // A long pass-through line is streamed on rather than held; once it
        // streams, each piece goes out as soon as it is final.
        if self.failed.is_none()
            && !dropping_own
            && self.proj.repeated().is_none()
            && !end
            && !self.line_out.is_empty()
            && (self.streaming_out || self.line_out.len() > shared.cfg.max_hold)
        {
            if !self.streaming_out {
                shared.log(LogLevel::Debug, "streaming a long pass-through line");
            }
            self.streaming_out = true;
            out.extend_from_slice(&self.line_out);
            self.line_out.clear();
        }
        if end {
            self.end_line(out);
            self.reset_line();
        }
    }

    /// The current line ended: forward it or drop it, and settle what it
    /// answered.
    pub(crate) fn end_line(&mut self, out: &mut Vec<u8>) {
        let shared = &*self.calls.0;
        let proj = &mut self.proj;
        let line_out = &mut self.line_out;
        let blank = self.first.is_none();
        if !blank && self.failed.is_none() {
            if let Err(e) = proj.finish(line_out) {
                self.failed = Some(e.to_string());
            }
        }
        if let Some(what) = proj.repeated() {
            self.failed = Some(what.to_string());
        }
        if blank {
            return;
        }
        // The projector's reading of the id, else the look-ahead probe's:
        // borrowed, not copied.
        let proj = &*proj;
        let id = proj.id().or(self.probe.value.as_deref());
        if let Some(e) = self.failed.take() {
            line_out.clear();
            if self.streaming_out {
                // Bytes already went out: end the line so the client's framing survives.
                out.push(b'\n');
            }
            shared.log(
                LogLevel::Warn,
                &format!("dropped a malformed line from the server: {e}"),
            );
            // A server's own request is not an answer to any of the client's.
            // Without a readable id, the line is taken for the only pending
            // call's answer only if it began as one (a top-level `result` or
            // `error`): anything else is stray output (a debug print on
            // stdout), which the SDK clients skip while the call goes on, and
            // so does the proxy.
            let target = if proj.has_method() {
                None
            } else if let Some(id) = id {
                Some(Cow::Borrowed(id))
            } else if proj.has_answer() {
                only_pending(shared).map(Cow::Owned)
            } else {
                None
            };
            // Only a request still pending is answered; the proxy's own
            // `tools/list` is the proxy's to give up on, never the client's
            // to hear about (it never sent that id).
            let p = target.and_then(|tid| lock(&shared.pending).remove(&tid));
            match p {
                Some((tid, p)) if p.method == Method::ProxyToolsList => {
                    shared.own_tools_answered(&tid, None);
                }
                Some((tid, _)) => out.extend_from_slice(&jsonrpc::error_reply(
                    Some(&tid),
                    jsonrpc::INTERNAL_ERROR,
                    &format!("resultbudget: the server sent a malformed response ({e}); it was not forwarded"),
                )),
                None => {}
            }
            return;
        }
        // Ids are per direction: the id of a request or notification
        // from the server may equal a pending request of the client's,
        // and must not take its place.
        // The client's spelling of the id lands in `answered`, a buffer
        // the relay keeps (nothing allocated).
        let p = match id {
            Some(id) if !proj.has_method() => {
                lock(&shared.pending).remove_into(id, &mut self.answered)
            }
            _ => None,
        };
        let answered = p.is_some().then_some(self.answered.as_slice());
        // The session's own: the answer to its listing in flight, or one
        // to a listing answered already or given up on (the client never
        // sent that id; earlier builds passed such a second answer on).
        let own = self.own_past_hold == Some(true)
            || match (&p, id) {
                (Some(p), _) => p.method == Method::ProxyToolsList,
                (None, Some(id)) => !proj.has_method() && shared.is_own_id(id),
                (None, None) => false,
            };
        if own && self.streaming_out {
            // It began to stream before its id showed it (an id written
            // after the hold): end the line, so the client's framing
            // survives.
            out.push(b'\n');
        }
        // A task-augmented call's answer names its task: remember the tool,
        // so the task's result (from tasks/result) gets the tool's treatment.
        if let (Some(pend), true) = (p.as_ref(), self.tasks_on) {
            let tp = &mut self.task_probe;
            if let (Method::ToolsCall(tool), true, Some(task_id)) =
                (&pend.method, pend.task, tp.value.take())
            {
                let task_id = sniff::canonical(&task_id).into_owned();
                lock(&shared.tasks).insert(task_id, tool.to_string());
            }
        }
        if !own {
            line_out.push(b'\n');
            out.extend_from_slice(line_out);
        }
        if let (Some(p), Some(tp)) = (p.as_ref(), self.tools_probe.as_mut()) {
            if matches!(p.method, Method::ToolsList | Method::ProxyToolsList) {
                learn_tools(shared, tp);
                if let (true, Some(id)) = (own, answered) {
                    shared.own_tools_answered(id, tp.next_cursor.take());
                } else if tp.next_cursor.is_none() {
                    lock(&shared.tools_state).known = true;
                    shared.tools_cv.notify_all();
                }
            }
        } else if let (true, Some(id)) = (own, answered) {
            // An answer to the session's listing in a line that began before
            // the listing was pending, so not read for tools: stop waiting
            // for it, with the tools as far as they are known.
            shared.own_tools_answered(id, None);
        }
        if id.is_none() && is_list_changed(line_out) {
            shared.tools_changed();
        }
        let rec = proj.record();
        // Written only where the level shows it (not by default): a cut
        // is the proxy's usual work, and its line is not formatted for
        // nothing.
        if (rec.truncated() || proj.omitted_members() > 0) && shared.logs(LogLevel::Info) {
            let tool = match proj.treat() {
                Treat::ToolResult(c) => c.tool.as_deref().unwrap_or("?"),
                Treat::Pass => "?",
            };
            shared.log(
                LogLevel::Info,
                &format!(
                    "cut {tool}: {} bytes in -> {} out, budget_kind {}{}{}",
                    self.in_bytes,
                    line_out.len().saturating_sub(1),
                    rec.budget_kind().map_or("none", |k| k.as_str()),
                    if proj.typed_failed() {
                        " (typed: replaced by result_budget_exceeded)"
                    } else {
                        ""
                    },
                    match proj.omitted_members() {
                        0 => String::new(),
                        n => format!(", {n} envelope member(s) dropped"),
                    }
                ),
            );
        }
    }

    /// Ready for the next line, keeping the buffers.
    pub(crate) fn reset_line(&mut self) {
        self.line_out.clear();
        self.look.clear();
        self.probe.reset();
        self.tools_probe = None;
        self.task_probe.reset();
        self.tasks_on = false;
        self.started = false;
        self.deciding = false;
        self.streaming_out = false;
        self.own_past_hold = None;
        self.failed = None;
        self.in_bytes = 0;
        self.first = None;
    }
}

pub(crate) fn begin(shared: &Shared, proj: &mut Projector, treat: Treat) {
    let lim = match &treat {
        Treat::ToolResult(c) => c.tool.as_deref().map_or(shared.cfg.limits, |name| {
            shared
                .cfg
                .inventory
                .as_ref()
                .and_then(|inv| inv.row(name))
                .map_or(shared.cfg.limits, |r| {
                    r.apply_result_limits(shared.cfg.limits)
                })
        }),
        Treat::Pass => shared.cfg.limits,
    };
    proj.set_limits(lim);
    proj.begin(treat);
}

/// The treatment for a response whose id is known. An id that names no
/// pending request may still be matched by the client to one of its calls
/// (the TypeScript client reads it with `Number()`, so `"0x7"` and `" 7"` are
/// its call 7; the Python one reads `"07"` as 7): it gets the tightest
/// pending call's treatment, as an answer whose id is not found in the
/// look-ahead does. Earlier builds passed it on unbudgeted.
pub(crate) fn resolve(shared: &Shared, id: &[u8], spare: &mut Spare) -> Treat {
    let p = lock(&shared.pending).get(id).cloned();
    match p {
        Some(p) => shared.treat_for(id, &p, spare).1,
        None => fallback_treat(shared),
    }
}

/// What the pending requests say of the response that has begun.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Pick {
    /// The treatment, when it does not hang on the response's id.
    pub(crate) treat: Treat,
    /// Calls with different treatments (or a call and another request) are
    /// pending: read ahead for the id.
    pub(crate) ambiguous: bool,
    /// A `tools/list` is pending (the response may teach the tools).
    pub(crate) lists: bool,
    /// A task-augmented call is pending (the response may name its task).
    pub(crate) tasks: bool,
}

/// The treatment for a line before its id is known, from [`PendingSet`]'s
/// counts: a call's treatment is a function of its [`CallKey`] (its tool, a
/// task's looked up now, and its protocol generation), so when every pending
/// call has one key, or keys that come to the same tool, one treatment fits
/// them all, and it is built once. A gateway with many calls in flight asks
/// this at the start of every answer: building and comparing every pending
/// call's treatment made that cost grow with them, under the lock the
/// request side needs to register calls.
pub(crate) fn pick_treat(shared: &Shared, spare: &mut Spare) -> Pick {
    let pending = lock(&shared.pending);
    let (lists, tasks) = (pending.lists > 0, pending.tasks > 0);
    let mut keys = pending.calls.keys();
    let Some(first) = keys.next() else {
        // No live call; a cancelled one may still be answered late, and its
        // answer is found by its id.
        return Pick {
            treat: Treat::Pass,
            ambiguous: pending.cancelled_calls > 0,
            lists,
            tasks,
        };
    };
    let differ = pending.calls.len() > 1 && {
        let task_tools = lock(&shared.tasks);
        let t0 = first.tool(&task_tools);
        keys.any(|k| k.tool(&task_tools) != t0)
    };
    if differ || pending.others > 0 {
        return Pick {
            treat: Treat::Pass,
            ambiguous: true,
            lists,
            tasks,
        };
    }
    // One kind of call in flight: the response is for one of them.
    let (method, modern) = match first {
        CallKey::Tool(name, m) => (Method::ToolsCall(name.clone()), *m),
        CallKey::Task(task, m) => (Method::TasksResult(task.clone()), *m),
    };
    let p = Pending {
        method,
        cancelled: false,
        modern,
        task: false,
    };
    let (_, mut treat) = shared.treat_for(&[], &p, spare);
    if let Treat::ToolResult(c) = &mut treat {
        if let Some(v) = c.request_id.take() {
            spare.id = v;
        }
    }
    Pick {
        treat,
        ambiguous: false,
        lists,
        tasks,
    }
}

/// No id within the look-ahead: the tightest treatment among the pending calls
/// the client still waits for, or, when it waits for none, among the cancelled
/// ones (a cancelled call the server never answers must not make a live call's
/// answer typed).
pub(crate) fn fallback_treat(shared: &Shared) -> Treat {
    let pending = lock(&shared.pending);
    for cancelled in [false, true] {
        // The tightest: typed before untyped, then the smaller result budget;
        // ties go by tool name and protocol, so the pick does not hang on the
        // pending map's order.
        type Rank = (bool, u64, Option<String>, bool);
        let mut best: Option<(Rank, Treat)> = None;
        for (id, p) in pending.iter() {
            if p.cancelled != cancelled {
                continue;
            }
            if let Method::ToolsCall(_) | Method::TasksResult(_) = p.method {
                // Rare (no id in the look-ahead): fresh buffers for each.
                let (lim, mut t) = shared.treat_for(id, p, &mut Spare::default());
                let Treat::ToolResult(c) = &mut t else {
                    continue;
                };
                // Which call this answers is not known: a receipt names the
                // response's own id, not the id of the call guessed at.
                c.request_id = None;
                let rank = (!c.typed, lim.max_result_bytes, c.tool.clone(), c.modern);
                if best.as_ref().is_none_or(|(r, _)| rank < *r) {
                    best = Some((rank, t));
                }
            }
        }
        if let Some((_, t)) = best {
            return t;
        }
    }
    Treat::Pass
}

pub(crate) fn only_pending(shared: &Shared) -> Option<Vec<u8>> {
    let pending = lock(&shared.pending);
    let live: Vec<&[u8]> = pending
        .iter()
        .filter(|(_, p)| !p.cancelled)
        .map(|(k, _)| k)
        .collect();
    (live.len() == 1)
        .then(|| live.first().map(|k| k.to_vec()))
        .flatten()
}

/// The method that says the server's tools changed.
const LIST_CHANGED: &str = "notifications/tools/list_changed";

/// Whether a forwarded line (whole, and valid JSON) is
/// `notifications/tools/list_changed`: its top-level `method`, read as a
/// JSON reader reads it (the name or the key escaped, the last of duplicate
/// members, whitespace anywhere), is that name. The relay has dropped the
/// whitespace outside strings by the time it asks, but escapes stay as the
/// server wrote them: PHP's `json_encode` writes `\/`, which a search for
/// the compact spelling missed. Asked only of lines without an id, and
/// only a line that holds `list_changed` as written or a `\u` escape (its
/// letters may be escaped) is walked; the searchers are built once.
pub(crate) fn is_list_changed(line: &[u8]) -> bool {
    use memchr::memmem::Finder;
    use std::sync::LazyLock;
    static NAME: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"list_changed"));
    static ESCAPE: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\\u"));
    if NAME.find(line).is_none() && ESCAPE.find(line).is_none() {
        return false;
    }
    let mut walker = Walker::new();
    // The line was read already, as the session reads lone surrogates; here
    // only the method matters.
    walker.set_lone_surrogates(true);
    let mut decide = |path: &[Seg]| match path {
        [m] if m.is(b"method") => Want::Capture,
        _ => Want::Skip,
    };
    let mut changed = false;
    let mut on = |ev: Event<'_>| {
        if let Event::Scalar([m], raw) = ev {
            if m.is(b"method") {
                changed = sniff::json_str(raw).as_deref() == Some(LIST_CHANGED);
            }
        }
    };
    let read = walker.feed(line, &mut decide, &mut on);
    let read = read.and_then(|()| walker.finish(&mut decide, &mut on));
    read.is_ok() && changed
}

pub(crate) fn learn_tools(shared: &Shared, tp: &mut ToolsProbe) {
    tp.feed(&[], true);
    let mut tools = lock(&shared.tools);
    for (name, facts) in &tp.found {
        tools.insert(name.clone(), *facts);
    }
    shared.log(
        LogLevel::Debug,
        &format!("learned {} tool(s) from tools/list", tp.found.len()),
    );
}

#[cfg(test)]
mod tests {
    use super::{is_list_changed, ScalarProbe};

    /// A probe's value after `line` is fed in two pieces split at `at`.
    fn probed(mut probe: ScalarProbe, line: &[u8], at: usize) -> Option<Vec<u8>> {
        let (a, b) = line.split_at(at);
        probe.feed(a);
        probe.feed(b);
        probe.value
    }

    /// Which of a member's two values a probe keeps does not depend on
    /// where the line is split (fuzz finding 27: fed whole, the envelope's
    /// `id` probe kept the second `id`, fed in pieces the first, and the
    /// fed session answered another request).
    #[test]
    fn a_probe_keeps_the_same_one_of_two_values_at_every_split() {
        let ids: &[&[u8]] = &[
            br#"{"jsonrpc":"2.0","id":1,"x":"2.0","id":"second"}"#,
            br#"{"id":1,"id":2,"result":{}}"#,
            br#"{"jsonrpc":"2.0","id":1,"id":"resul\u00e9","result":{"#,
        ];
        for line in ids {
            for at in 0..=line.len() {
                assert_eq!(
                    probed(ScalarProbe::id(), line, at).as_deref(),
                    Some(&b"1"[..]),
                    "{} split at {at}",
                    String::from_utf8_lossy(line)
                );
            }
        }
        let tasks: &[&[u8]] = &[
            br#"{"jsonrpc":"2.0","id":3,"result":{"task":{"taskId":"a","status":"working","taskId":"b"}}}"#,
            br#"{"result":{"task":{"taskId":"a"},"task":{"taskId":"b"}},"id":3}"#,
        ];
        for line in tasks {
            for at in 0..=line.len() {
                assert_eq!(
                    probed(ScalarProbe::task_id(), line, at).as_deref(),
                    Some(&br#""b""#[..]),
                    "{} split at {at}",
                    String::from_utf8_lossy(line)
                );
            }
        }
    }

    /// The method read as a reader reads it, not by one spelling: PHP
    /// escapes `/`, any name or key may be escaped, and whitespace is
    /// allowed (the relay drops it before it asks; this does not count on
    /// that).
    #[test]
    fn list_changed_is_read_in_any_spelling() {
        let yes: &[&[u8]] = &[
            br#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#,
            br#"{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}"#,
            br#"{ "method" :"notifications\/tools\/list_changed" ,"jsonrpc":"2.0"}"#,
            br#"{"m\u0065thod":"notifications/tools/list\u005fchanged","jsonrpc":"2.0"}"#,
            br#"{"method":"notifications/message","method":"notifications/tools/list_changed"}"#,
            br#"{"params":{"x":[1,{"method":"y"}]},"method":"notifications/tools/list_changed"}"#,
        ];
        for line in yes {
            assert!(is_list_changed(line), "{}", String::from_utf8_lossy(line));
        }
        let no: &[&[u8]] = &[
            // The last of duplicate members is the one read.
            br#"{"method":"notifications/tools/list_changed","method":"notifications/message"}"#,
            // Not at the top level, or inside a string.
            br#"{"method":"notifications/message","params":{"method":"notifications/tools/list_changed"}}"#,
            br#"{"method":"notifications/message","params":{"data":"\"method\":\"notifications/tools/list_changed\""}}"#,
            // Other names.
            br#"{"method":"notifications/resources/list_changed"}"#,
            br#"{"method":"notifications/tools/list_changed/x"}"#,
            br#"{"method":"notifications/progress","params":{"message":"caf\u00e9"}}"#,
            br#"{"method":"notifications/progress"}"#,
        ];
        for line in no {
            assert!(!is_list_changed(line), "{}", String::from_utf8_lossy(line));
        }
    }
}
