"""``RedisHistoryProvider``: conversation history in Redis, with optional expiry per session."""

from __future__ import annotations

import contextlib
import json
import threading
import uuid
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Unpack
from urllib.parse import unquote

from ravi.capabilities.redis._client import RedisOptions, RedisStore, mapped_errors, part
from ravi.capabilities.redis.options import RedisHistoryOptions
from ravi.kernel.errors import BackendUnavailable, MessageConflict
from ravi.kernel.messages import ChatMessage, messages_from_json
from ravi.kernel.scope import Scope, new_generation
from ravi.kernel.storage.forget import check_forget
from ravi.kernel.storage.history import (
    HistoryWindow,
    StoredMessage,
    check_append,
    check_replace,
    stored_body,
    window_of,
)
from ravi.kernel.storage.summaries import check_summary_scope
from ravi.kernel.tokens import stored_tokens
from ravi.kernel.values import MAX_COUNT, check_count, check_page, check_scope, check_span, check_summary, ttl_seconds

# KEYS: messages (list of JSON), runs (list of run ids, same positions), ids (hash message id -> SHA-1 of its body,
#       or 1 when written before bodies were compared), epoch, tokens (list of "<running total> <stored count> <role
#       letter>", same positions), systems (positions of the system messages), summaries (hash)
# ARGV: ttl in ms (0 = none), a fresh epoch token, then quadruples of (message id, run id, body, "<count> <role>")
# The epoch is the session's generation: set when the session is created, replaced by clear, clear_run and
# replace_last, gone with the session on expiry; a random token, never the same twice. A cached copy is good only
# while its epoch is the session's. A session written before counts were kept has a shorter tokens list; it gets
# no counts until a windowed read fills them in.
# A message id is a promise: an id the session holds with another body refuses the whole batch, before anything is
# written ({-1, id}); the same body again is skipped (a retry).
_APPEND_BODY = """
for i = first, #ARGV, 4 do
  local held = redis.call('HGET', KEYS[3], ARGV[i])
  if held and held ~= '1' and held ~= redis.sha1hex(ARGV[i + 2]) then return {-1, ARGV[i]} end
end
redis.call('SET', KEYS[4], ARGV[2], 'NX')
local n = redis.call('LLEN', KEYS[1])
local counted = redis.call('LLEN', KEYS[5]) == n
local total = 0
if counted and n > 0 then
  total = tonumber(string.match(redis.call('LINDEX', KEYS[5], -1), '^(%d+)'))
end
local added = 0
for i = first, #ARGV, 4 do
  if redis.call('HSETNX', KEYS[3], ARGV[i], redis.sha1hex(ARGV[i + 2])) == 1 then
    redis.call('RPUSH', KEYS[1], ARGV[i + 2])
    redis.call('RPUSH', KEYS[2], ARGV[i + 1])
    if counted then
      local tokens, role = string.match(ARGV[i + 3], '^(%d+) (%a)$')
      total = total + tonumber(tokens)
      redis.call('RPUSH', KEYS[5], total .. ' ' .. tokens .. ' ' .. role)
      if role == 's' then redis.call('RPUSH', KEYS[6], n + added) end
    end
    added = added + 1
  end
end
local ttl = tonumber(ARGV[1])
if ttl > 0 then
  for k = 1, 7 do if redis.call('EXISTS', KEYS[k]) == 1 then redis.call('PEXPIRE', KEYS[k], ttl) end end
end
"""
_APPEND = "local first = 3\n" + _APPEND_BODY + "return added\n"

# Replaces the newest message if its id is ARGV[3]: removes it (with its entries in every list), then appends as
# _APPEND does (its checks first), in a new generation without summaries. KEYS: as _APPEND. ARGV: ttl in ms, a
# fresh epoch token, the id of the message to replace, then quadruples as _APPEND's. Returns 0
# (nothing changed), 1, or {-1, id} for an id held with another body (nothing changed).
_REPLACE_LAST = (
    """
local first = 4
local last = redis.call('LINDEX', KEYS[1], -1)
if not last or cjson.decode(last)['id'] ~= ARGV[3] then return 0 end
for i = 4, #ARGV, 4 do
  if ARGV[i] ~= ARGV[3] then
    local held = redis.call('HGET', KEYS[3], ARGV[i])
    if held and held ~= '1' and held ~= redis.sha1hex(ARGV[i + 2]) then return {-1, ARGV[i]} end
  end
end
local n = redis.call('LLEN', KEYS[1])
local counted = redis.call('LLEN', KEYS[5]) == n
redis.call('RPOP', KEYS[1])
redis.call('RPOP', KEYS[2])
redis.call('HDEL', KEYS[3], ARGV[3])
if counted then
  redis.call('RPOP', KEYS[5])
  if tonumber(redis.call('LINDEX', KEYS[6], -1) or -1) == n - 1 then redis.call('RPOP', KEYS[6]) end
end
redis.call('DEL', KEYS[4], KEYS[7])
"""
    + _APPEND_BODY
    + "return 1\n"
)

# Replaces the session's transcript with a batch of at least one message (an empty one is _CLEAR): removes its
# messages and summaries, gives it a new generation, then appends as _APPEND does. KEYS: as _APPEND. ARGV: ttl in
# ms, a fresh epoch token, then quadruples as _APPEND's. Returns how many messages it held.
_REPLACE_SESSION = (
    """
local first = 3
local held = redis.call('LLEN', KEYS[1])
local written = held > 0 or redis.call('EXISTS', KEYS[4]) == 1
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7])
if written then
  local ttl = tonumber(ARGV[1])
  if ttl > 0 then redis.call('SET', KEYS[4], ARGV[2], 'PX', ttl) else redis.call('SET', KEYS[4], ARGV[2]) end
end
"""
    + _APPEND_BODY
    + "return held\n"
)

# The windowed read: the newest messages past ARGV[1] stored tokens (walking back from the end, a chunk at a time),
# moved back past tool results and system messages, and the system messages before them.
# KEYS: messages, tokens, systems, epoch. ARGV: tokens, then what the caller holds of this session from its last
# read: that read's epoch ('' for nothing), and the positions low..high of its tail (it also holds every system
# message before low). In the same epoch positions never move, so only what the caller lacks is sent.
# Returns {-1} for a session without counts, else {start, complete, epoch or '', hit, {positions of the system
# messages sent from before start}, {their bodies}, first position of the older part, {its bodies}, {its
# "<total> <count> <role>"}, first position of the newer part, {its bodies}, {its entries}, the stored tokens before
# start}.
_READ_WINDOW = """
local n = redis.call('LLEN', KEYS[1])
local epoch = redis.call('GET', KEYS[4]) or ''
if n == 0 then return {0, 1, epoch, 0, {}, {}, 0, {}, {}, 0, {}, {}, 0} end
if redis.call('LLEN', KEYS[2]) ~= n then return {-1} end
local total = tonumber(string.match(redis.call('LINDEX', KEYS[2], -1), '^(%d+)'))
local limit = total - tonumber(ARGV[1])
local start = 0
if limit > 0 then
  -- the latest position whose running total before it is below limit (position 0's is 0): running totals grow,
  -- so search back from the end in doubling steps, then halve the gap; only a few entries are read
  local function before(pos)
    local cum, tokens = string.match(redis.call('LINDEX', KEYS[2], pos), '^(%d+) (%d+)')
    return tonumber(cum) - tonumber(tokens)
  end
  local good, bad, step = n - 1, n, 1
  while good > 0 and before(good) >= limit do
    bad = good
    good = math.max(0, n - 1 - step)
    step = step * 2
  end
  while bad - good > 1 do
    local mid = math.floor((good + bad) / 2)
    if before(mid) < limit then good = mid else bad = mid end
  end
  -- moved back past tool results and system messages
  while good > 0 do
    local role = string.match(redis.call('LINDEX', KEYS[2], good), ' (%a)$')
    if role ~= 't' and role ~= 's' then break end
    good = good - 1
  end
  start = good
end
local hit = 0
local low, high = 0, -1
if epoch ~= '' and epoch == ARGV[2] then hit, low, high = 1, tonumber(ARGV[3]), tonumber(ARGV[4]) end
local positions, head, before = {}, {}, 0
for _, p in ipairs(redis.call('LRANGE', KEYS[3], 0, -1)) do
  local pos = tonumber(p)
  if pos < start then
    before = before + 1
    if pos > high then
      positions[#positions + 1] = pos
      head[#head + 1] = redis.call('LINDEX', KEYS[1], pos)
    end
  end
end
local complete = 0
if before == start then complete = 1 end
local older, older_counts, newer_from = {}, {}, start
if hit == 1 and start <= high then
  if start < low then
    older = redis.call('LRANGE', KEYS[1], start, low - 1)
    older_counts = redis.call('LRANGE', KEYS[2], start, low - 1)
  end
  newer_from = high + 1
end
local newer, newer_counts = {}, {}
if newer_from < n then
  newer = redis.call('LRANGE', KEYS[1], newer_from, -1)
  newer_counts = redis.call('LRANGE', KEYS[2], newer_from, -1)
end
local offset = 0
if start > 0 then
  local cum, tokens = string.match(redis.call('LINDEX', KEYS[2], start), '^(%d+) (%d+)')
  offset = tonumber(cum) - tonumber(tokens)
end
return {start, complete, epoch, hit, positions, head, start, older, older_counts, newer_from, newer, newer_counts,
  offset}
"""

# Fills in the counts of a session written before they were kept, if it has not changed since it was read.
# KEYS: messages, tokens, systems, epoch. ARGV: epoch when read, length when read, then "<count> <role>" per message.
_RECOUNT = """
if redis.call('GET', KEYS[4]) ~= ARGV[1] or redis.call('LLEN', KEYS[1]) ~= tonumber(ARGV[2]) then return 0 end
redis.call('DEL', KEYS[2], KEYS[3])
local total = 0
for i = 3, #ARGV do
  local tokens, role = string.match(ARGV[i], '^(%d+) (%a)$')
  total = total + tonumber(tokens)
  redis.call('RPUSH', KEYS[2], total .. ' ' .. tokens .. ' ' .. role)
  if role == 's' then redis.call('RPUSH', KEYS[3], i - 3) end
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[2], ttl)
  if redis.call('EXISTS', KEYS[3]) == 1 then redis.call('PEXPIRE', KEYS[3], ttl) end
end
return 1
"""

# Rebuilds the session without one run's messages, on the server and a chunk at a time, so a long session never
# blocks Redis for long. The kept messages go to scratch keys; the last chunk swaps them in atomically (with a
# new epoch, and without the session's summaries), so readers see the session before or after, never
# half-rewritten. Appends that land meanwhile go to the session's tail and are taken by a later chunk. A removal
# that completes meanwhile (the epoch changes) abandons the rewrite; the first chunk takes the session as it is
# (returning its epoch), so a session that fits one chunk is rewritten in one step and never abandoned.
# KEYS: messages, runs, ids, epoch, scratch messages, scratch runs, scratch ids, tokens, systems, scratch tokens,
#       scratch systems, summaries
# ARGV: epoch when the rewrite began, first position of this chunk, chunk size, run id, new epoch, ttl in ms
# Returns {-1, 0} (abandoned), {0, next position, epoch} (more to do) or {1, removed}. Counts are carried over with
# their messages (running totals recomputed); a session without counts stays so.
_CLEAR_RUN = """
local start = tonumber(ARGV[2])
local epoch = redis.call('GET', KEYS[4]) or ''
if start > 0 and epoch ~= ARGV[1] then
  redis.call('DEL', KEYS[5], KEYS[6], KEYS[7], KEYS[10], KEYS[11])
  return {-1, 0}
end
local stop = start + tonumber(ARGV[3]) - 1
local runs = redis.call('LRANGE', KEYS[2], start, stop)
local bodies = redis.call('LRANGE', KEYS[1], start, stop)
local total = redis.call('LLEN', KEYS[2])
local counted = redis.call('LLEN', KEYS[8]) == total
local entries = {}
local sum = 0
if counted then
  entries = redis.call('LRANGE', KEYS[8], start, stop)
  local last = redis.call('LINDEX', KEYS[10], -1)
  if last then sum = tonumber(string.match(last, '^(%d+)')) end
end
for i = 1, #runs do
  if runs[i] ~= ARGV[4] then
    redis.call('RPUSH', KEYS[5], bodies[i])
    redis.call('RPUSH', KEYS[6], runs[i])
    redis.call('HSET', KEYS[7], cjson.decode(bodies[i])['id'], redis.sha1hex(bodies[i]))
    if counted then
      local _, tokens, role = string.match(entries[i], '^(%d+) (%d+) (%a)$')
      sum = sum + tonumber(tokens)
      local position = redis.call('RPUSH', KEYS[10], sum .. ' ' .. tokens .. ' ' .. role) - 1
      if role == 's' then redis.call('RPUSH', KEYS[11], position) end
    end
  end
end
local done = start + #runs
if done < total then
  for _, k in ipairs({5, 6, 7, 10, 11}) do
    if redis.call('EXISTS', KEYS[k]) == 1 then redis.call('PEXPIRE', KEYS[k], 3600000) end
  end
  return {0, done, epoch}
end
local kept = redis.call('LLEN', KEYS[6])
if kept == total then  -- nothing of the run (another removal took it): the session stays as it is
  redis.call('DEL', KEYS[5], KEYS[6], KEYS[7], KEYS[10], KEYS[11])
  return {1, 0}
end
redis.call('DEL', KEYS[8], KEYS[9], KEYS[12])
if kept == 0 then
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[10], KEYS[11])
else
  for k = 1, 3 do
    redis.call('RENAME', KEYS[k + 4], KEYS[k])
    redis.call('PERSIST', KEYS[k])
  end
  if counted then
    for k = 8, 9 do
      if redis.call('EXISTS', KEYS[k + 2]) == 1 then
        redis.call('RENAME', KEYS[k + 2], KEYS[k])
        redis.call('PERSIST', KEYS[k])
      end
    end
  else
    redis.call('DEL', KEYS[10], KEYS[11])
  end
end
redis.call('SET', KEYS[4], ARGV[5])
local ttl = tonumber(ARGV[6])
if ttl > 0 then
  for _, k in ipairs({1, 2, 3, 4, 8, 9}) do
    if redis.call('EXISTS', KEYS[k]) == 1 then redis.call('PEXPIRE', KEYS[k], ttl) end
  end
end
return {1, total - kept}
"""

# Removes the session's messages and summaries and gives it a new generation, if it was ever written (a session
# never written gets no generation). KEYS: messages, runs, ids, epoch, tokens, systems, summaries. ARGV: new epoch, ttl
# in ms. Returns how many messages it held.
_CLEAR = """
local n = redis.call('LLEN', KEYS[1])
if n == 0 and redis.call('EXISTS', KEYS[4]) == 0 then
  redis.call('DEL', KEYS[7])  -- summaries kept without a generation, for a session never written
  return 0
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[5], KEYS[6], KEYS[7])
local ttl = tonumber(ARGV[2])
if ttl > 0 then redis.call('SET', KEYS[4], ARGV[1], 'PX', ttl) else redis.call('SET', KEYS[4], ARGV[1]) end
return n
"""

# Erases the session: every key of it, its generation included (a summary written back under the old generation is
# refused, as the epoch it checks is gone). KEYS: messages, runs, ids, epoch, tokens, systems, summaries. Returns
# how many messages it held.
_FORGET = """
local n = redis.call('LLEN', KEYS[1])
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7])
return n
"""

# The session's generation; a session written before generations were kept gets one now. KEYS: messages, epoch.
# ARGV: a fresh epoch token.
_GENERATION = """
local epoch = redis.call('GET', KEYS[2])
if epoch then return epoch end
if redis.call('LLEN', KEYS[1]) == 0 then return '' end
redis.call('SET', KEYS[2], ARGV[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
return ARGV[1]
"""

# Keeps a summary unless the span has one, if the generation is still the session's ('' skips the check: a summary
# kept unchecked). KEYS: epoch, summaries. ARGV: generation, field, text, ttl in ms. Returns 1 if the span has a
# summary afterwards, else 0.
_PUT_SUMMARY = """
if ARGV[1] ~= '' and redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('HSETNX', KEYS[2], ARGV[2], ARGV[3])
local ttl = tonumber(ARGV[4])
if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
return 1
"""


_REWRITES = 100
"""How many times ``clear_run`` starts a rewrite again that other removals overtook (only sessions longer than
one chunk can be overtaken)."""


def summary_field(generation: str | None, span_id: str) -> str:
    """The hash field of a summary: an injective JSON encoding of its generation (``None`` included) and span."""
    return json.dumps([generation, span_id], ensure_ascii=False)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _quadruples(messages: Sequence[ChatMessage], run_id: str) -> list[str]:
    """The script arguments of ``messages``: id, run id, stored body and "<count> <role>" of each."""
    args: list[str] = []
    for m in messages:
        args += [m.id, run_id, stored_body(m), _count(m)]
    return args


def _refused(result: object) -> None:
    """``MessageConflict`` when a script refused a batch for a held id of another message (``{-1, id}``)."""
    if isinstance(result, list) and result and int(result[0]) == -1:
        raise MessageConflict(_text(result[1]))


def _count(message: ChatMessage) -> str:
    """A message's stored count and role letter, as the scripts keep them."""
    role = {"system": "s", "tool": "t"}.get(message.role, "o")
    return f"{stored_tokens(message)} {role}"


@dataclass(frozen=True)
class _Cached:
    """A session as read at one moment, in one life (``epoch``): replaced, never changed."""

    epoch: bytes
    messages: list[ChatMessage]


@dataclass(frozen=True)
class _Window:
    """The messages of the last window read from a session in one life (``epoch``), by list position: its tail
    (positions ``low`` to ``high``) and every system message before it. Replaced, never changed."""

    epoch: bytes
    low: int
    high: int
    positions: list[int]
    messages: list[ChatMessage]


class RedisHistoryProvider(RedisStore):
    """The ``HistoryProvider`` contract on Redis: the fast, expiring tier.

    * A session is a list of messages (plus a parallel list of run ids and a hash of message ids) under keys
      that share one hash tag, so it works on Redis Cluster too.
    * ``append_many`` is one server-side script: atomic, one round trip, and idempotent by message id.
    * ``get_messages`` is one round trip (``LRANGE``); the provider keeps the sessions it read last
      (``cache_sessions``) and fetches only what was appended since, checked against the session's epoch: a token
      that names one life of the session, replaced by ``clear_run`` and gone with a ``clear`` or an expiry.
    * ``clear_run`` runs on the server: the session is never read into the client.
    * ``ttl`` (seconds or a timedelta) expires a whole session after that long without writes: every write
      refreshes it.

    Args:
        url: ``redis://host:port/db``.
        prefix: Key prefix (default ``ravi``) so several apps can share one Redis.
        ttl: Optional expiry of idle sessions.
        cache_sessions: Sessions kept parsed in memory (0 turns the cache off).
        socket_timeout: Seconds before a command is abandoned (``BackendUnavailable``).
        clear_run_chunk: Messages ``clear_run`` rewrites per script call (the longest Redis is kept busy).
    """

    Options = RedisHistoryOptions

    def __init__(
        self,
        url: str,
        *,
        ttl: timedelta | float | None = None,
        cache_sessions: int = 64,
        clear_run_chunk: int = 1_000,
        **options: Unpack[RedisOptions],
    ) -> None:
        RedisHistoryOptions.check(
            url=url, ttl=ttl, cache_sessions=cache_sessions, clear_run_chunk=clear_run_chunk, **options
        )
        super().__init__(url, **options)
        seconds = ttl_seconds(ttl)
        self._ttl_ms = 0 if seconds is None else max(1, int(seconds * 1000))
        self._cache: OrderedDict[tuple[str, str], _Cached] = OrderedDict()
        self._windows: OrderedDict[tuple[str, str], _Window] = OrderedDict()
        self._cache_size = cache_sessions
        self._caching = threading.Lock()  # the steps of keeping a copy, never held across an await
        self.clear_run_chunk = clear_run_chunk

    def _keep(self, cache: OrderedDict[tuple[str, str], Any], key: tuple[str, str], value: Any) -> None:
        """Keep ``value`` as ``cache``'s most recent entry, dropping the oldest past ``cache_sessions``: one step
        for every thread (another thread's removal may drop the key between the steps otherwise)."""
        with self._caching:
            cache[key] = value
            cache.move_to_end(key)
            while len(cache) > self._cache_size:
                cache.popitem(last=False)

    def _drop(self, key: tuple[str, str], *, cache: bool = True, windows: bool = True) -> None:
        """Forget the copies kept of the session ``key``: the whole one, the last window, or both."""
        with self._caching:
            if cache:
                self._cache.pop(key, None)
            if windows:
                self._windows.pop(key, None)

    def _keys(self, agent_id: str, session_id: str) -> list[str]:
        key = self.redis.key
        tails = ("messages", "runs", "ids", "epoch", "tokens", "systems", "summaries")
        return [key("h", agent_id, session_id, tail=t) for t in tails]

    async def append(self, agent_id: str, message: ChatMessage, *, session_id: str, run_id: str = "") -> None:
        """Add one message at the end of the session."""
        await self.append_many(agent_id, [message], session_id=session_id, run_id=run_id)

    async def append_many(
        self, agent_id: str, messages: Sequence[ChatMessage], *, session_id: str, run_id: str = ""
    ) -> int:
        """Add messages at the end of the session: one atomic script, one round trip; returns how many it stored
        (counted by the script: a message whose id the session holds is skipped)."""
        check_append(agent_id, session_id, run_id, messages)
        if not messages:
            return 0
        args: list[str | int] = [self._ttl_ms, new_generation(), *_quadruples(messages, run_id)]
        with mapped_errors():
            result = await self.redis.run_script(_APPEND, self._keys(agent_id, session_id), args)
        _refused(result)
        return int(result)

    async def get_messages(
        self, agent_id: str, *, session_id: str, limit: int | None = None, offset: int = 0
    ) -> list[ChatMessage]:
        """The session's messages, oldest first, from ``offset``, at most ``limit``; one round trip."""
        check_scope(agent_id=agent_id, session_id=session_id)
        limit, offset = check_page(limit, offset)
        keys = self._keys(agent_id, session_id)
        if self._cache_size == 0:
            if limit == 0:
                return []
            end = -1 if limit is None else min(offset + limit - 1, MAX_COUNT)
            with mapped_errors():
                rows = await self.redis.client.lrange(keys[0], offset, end)
            return messages_from_json(rows)
        cache_key = (agent_id, session_id)
        # A snapshot: copies are never changed in place, so concurrent readers each build their own from it.
        base = self._cache.get(cache_key)
        have = len(base.messages) if base else 0
        epoch, length, raw = await self._read(keys, have)
        if base is not None and base.epoch == epoch and length == have + len(raw):
            messages = base.messages + messages_from_json(raw) if raw else base.messages
        else:  # no copy, or the session was cleared, expired or rewritten since it was made: read it whole
            if have:
                epoch, length, raw = await self._read(keys, 0)
            messages = messages_from_json(raw)
        if epoch is None:  # no session (or one written before epochs existed): nothing to keep
            self._drop(cache_key, windows=False)
        else:
            copy = _Cached(epoch, messages)
            current = self._cache.get(cache_key)
            if current is None or current is base or current.epoch != epoch or len(current.messages) <= len(messages):
                self._keep(self._cache, cache_key, copy)
        end_index = None if limit is None else offset + limit
        return messages[offset:end_index]

    async def get_stored(
        self, agent_id: str, *, session_id: str, limit: int | None = None, offset: int = 0
    ) -> list[StoredMessage]:
        """The session's messages with their run ids (``RunReader``), oldest first, from ``offset``, at most
        ``limit``: both lists read in one transaction, so the run ids are those of the messages."""
        check_scope(agent_id=agent_id, session_id=session_id)
        limit, offset = check_page(limit, offset)
        if limit == 0:
            return []
        keys = self._keys(agent_id, session_id)
        end = -1 if limit is None else min(offset + limit - 1, MAX_COUNT)
        with mapped_errors():
            async with self.redis.client.pipeline(transaction=True) as pipe:
                pipe.lrange(keys[0], offset, end)
                pipe.lrange(keys[1], offset, end)
                bodies, runs = await pipe.execute()
        messages = messages_from_json(bodies)
        return [StoredMessage(m, _text(r)) for m, r in zip(messages, runs, strict=True)]

    async def _read(self, keys: list[str], start: int) -> tuple[bytes | None, int, list[bytes]]:
        """The session's epoch, length and messages from ``start``, read atomically in one round trip."""
        with mapped_errors():
            async with self.redis.client.pipeline(transaction=True) as pipe:
                pipe.get(keys[3])
                pipe.llen(keys[0])
                pipe.lrange(keys[0], start, -1)
                epoch, length, raw = await pipe.execute()
        return epoch, int(length), list(raw)

    async def clear(self, agent_id: str, *, session_id: str) -> int:
        """Remove the session's messages and summaries, in a new generation; returns how many messages it held.
        One script."""
        check_scope(agent_id=agent_id, session_id=session_id)
        with mapped_errors():
            count = await self.redis.run_script(
                _CLEAR, self._keys(agent_id, session_id), [new_generation(), self._ttl_ms]
            )
        self._drop((agent_id, session_id))
        return int(count)

    async def clear_run(self, agent_id: str, *, session_id: str, run_id: str) -> int:
        """Remove exactly the messages ``run_id`` wrote to the session (and, when it removed any, the session's
        summaries, in a new generation); returns how many.

        Runs on the server, ``clear_run_chunk`` messages per script call, so a long session never blocks Redis
        for long; readers see the session before or after, never in between. A session that fits one chunk is
        rewritten in one step; a longer one whose rewrite another removal overtakes starts again.
        """
        check_scope(agent_id=agent_id, session_id=session_id, run_id=run_id)
        keys = self._keys(agent_id, session_id)
        key = self.redis.key
        for _ in range(_REWRITES):
            with mapped_errors():
                found = await self.redis.client.lpos(keys[1], run_id)
            if found is None:
                return 0
            token = uuid.uuid4().hex
            scratch = [key("h", agent_id, session_id, tail=f"rewrite:{token}:{t}") for t in ("m", "r", "i", "t", "s")]
            start, state, removed, epoch = 0, 0, 0, ""
            try:
                while state == 0:
                    with mapped_errors():
                        result = await self.redis.run_script(
                            _CLEAR_RUN,
                            [*keys[:4], *scratch[:3], *keys[4:6], *scratch[3:], keys[6]],
                            [epoch, start, self.clear_run_chunk, run_id, new_generation(), self._ttl_ms],
                        )
                    state, start = int(result[0]), int(result[1])
                    if state == 0 and len(result) > 2:
                        epoch = result[2]
                    removed = start
            finally:
                if state == 0:  # interrupted: drop the scratch copy
                    with contextlib.suppress(Exception):
                        await self.redis.client.delete(*scratch)
            if state == 1:
                if removed:
                    self._drop((agent_id, session_id))
                return removed
        raise BackendUnavailable(
            f"clear_run: {_REWRITES} rewrites of this long session were overtaken by other removals",
            hint="try again, or raise clear_run_chunk so the session is rewritten in one step",
        )

    async def replace_last(
        self,
        agent_id: str,
        *,
        session_id: str,
        message_id: str,
        messages: Sequence[ChatMessage] = (),
        run_id: str = "",
    ) -> bool:
        """If the newest message has id ``message_id``, put ``messages`` (tagged ``run_id``) in its place in a new
        generation of the session (``TailEditor``): one script, so concurrent editors and writers never lose or
        reorder each other's messages. ``False`` (nothing changed) otherwise."""
        check_replace(agent_id, session_id, message_id, messages, run_id)
        args: list[str | int] = [self._ttl_ms, new_generation(), message_id, *_quadruples(messages, run_id)]
        with mapped_errors():
            result = await self.redis.run_script(_REPLACE_LAST, self._keys(agent_id, session_id), args)
        _refused(result)
        if result:
            self._drop((agent_id, session_id))
        return bool(result)

    async def replace_session(
        self, agent_id: str, messages: Sequence[ChatMessage], *, session_id: str, run_id: str = ""
    ) -> int:
        """Put ``messages`` (tagged ``run_id``) in place of the session's messages and summaries, in a new
        generation (``SessionReplacer``): one script, so a reader sees the old transcript or the new one and a
        failure leaves the old one; returns how many messages it held. With no ``messages`` it is ``clear`` (the
        script would give a session never written a generation, and an epoch key that never expires)."""
        check_append(agent_id, session_id, run_id, messages)
        if not messages:
            return await self.clear(agent_id, session_id=session_id)
        args: list[str | int] = [self._ttl_ms, new_generation(), *_quadruples(messages, run_id)]
        with mapped_errors():
            removed = await self.redis.run_script(_REPLACE_SESSION, self._keys(agent_id, session_id), args)
        self._drop((agent_id, session_id))
        return int(removed)

    async def generation(self, agent_id: str, *, session_id: str) -> str:
        """The session's generation (``SessionGeneration``); ``""`` for a session never written (or expired)."""
        check_scope(agent_id=agent_id, session_id=session_id)
        keys = self._keys(agent_id, session_id)
        with mapped_errors():
            value = await self.redis.run_script(_GENERATION, [keys[0], keys[3]], [new_generation()])
        return _text(value)

    async def get_summary(self, scope: Scope, span_id: str) -> str | None:
        """The summary of the span in ``scope`` (``SummaryStore``), or ``None``."""
        check_summary_scope(scope)
        check_span(span_id)
        with mapped_errors():
            value = await self.redis.client.hget(
                self._keys(scope.agent_id, scope.session_id)[6], summary_field(scope.generation, span_id)
            )
        return None if value is None else _text(value)

    async def put_summary(self, scope: Scope, span_id: str, text: str) -> bool:
        """Keep ``text`` as the span's summary in ``scope`` unless it has one; ``False`` (nothing kept) when
        ``scope.generation`` is not the session's, checked in the script that writes it. A scope without a
        generation is kept unchecked, until the session is cleared. Summaries expire with the session."""
        check_summary_scope(scope)
        check_span(span_id)
        check_summary(text)
        if scope.generation == "":
            return False
        keys = self._keys(scope.agent_id, scope.session_id)
        field = summary_field(scope.generation, span_id)
        with mapped_errors():
            kept = await self.redis.run_script(
                _PUT_SUMMARY, [keys[3], keys[6]], [scope.generation or "", field, text, self._ttl_ms]
            )
        return bool(kept)

    async def clear_summaries(self, agent_id: str, *, session_id: str | None = None) -> int:
        """Remove every summary of the session (of every session of the agent when ``session_id`` is ``None``,
        found by ``SCAN``), whatever its generation; returns how many."""
        check_scope(agent_id=agent_id)
        if session_id is not None:
            check_scope(session_id=session_id)
            found = [self._keys(agent_id, session_id)[6]]
        else:
            pattern = f"{self.redis.prefix}:h:{{{part(agent_id)}|*}}:summaries"
            with mapped_errors():
                found = [raw async for raw in self.redis.client.scan_iter(match=pattern, count=1_000)]
        removed = 0
        for summaries in found:
            with mapped_errors():
                async with self.redis.client.pipeline(transaction=True) as pipe:
                    pipe.hlen(summaries)
                    pipe.delete(summaries)
                    count, _ = await pipe.execute()
            removed += int(count)
        return removed

    async def read_window(self, agent_id: str, *, session_id: str, tokens: int) -> HistoryWindow:
        """The newest messages past ``tokens`` stored tokens, and the system messages before them
        (``WindowReader``): one script, which walks back from the end of the session only as far as the window.
        The messages of the session's last window read here are kept parsed (for ``cache_sessions`` sessions)
        and are not sent again while the session keeps its epoch: a warm read transfers and parses only what is
        new to this process."""
        check_scope(agent_id=agent_id, session_id=session_id)
        check_count(tokens, "tokens")
        keys = self._keys(agent_id, session_id)
        key = (agent_id, session_id)
        cached = self._windows.get(key)
        have = [cached.epoch, cached.low, cached.high] if cached else ["", 0, -1]
        with mapped_errors():
            result = await self.redis.run_script(_READ_WINDOW, [keys[0], keys[4], keys[5], keys[3]], [tokens, *have])
        if result[0] == -1:  # written before counts were kept: read it whole and store its counts
            self._drop(key, cache=False)
            epoch, length, raw = await self._read(keys, 0)
            whole = messages_from_json(raw)
            if epoch is not None:
                with mapped_errors():
                    await self.redis.run_script(
                        _RECOUNT, [keys[0], keys[4], keys[5], keys[3]], [epoch, length, *map(_count, whole)]
                    )
            generation = _text(epoch) if epoch else await self.generation(agent_id, session_id=session_id)
            return window_of(whole, tokens, generation)
        start, complete, epoch, hit, head_at, head, older_from, older, older_counts, newer_from, newer, newer_counts = (
            result[:12]
        )
        offset = int(result[12])
        start, older_from, newer_from = int(start), int(older_from), int(newer_from)
        positions: list[int] = []
        messages: list[ChatMessage] = []
        if hit and cached is not None:  # held: every system message before start (all held ones sit below high)
            held_at, held = cached.positions, cached.messages
            cut = bisect_left(held_at, start)
            for i in range(cut):
                if held[i].role == "system":
                    positions.append(held_at[i])
                    messages.append(held[i])
        positions += map(int, head_at)
        messages += messages_from_json(head)
        self._parse(older_from, older, older_counts, positions, messages)
        if hit and cached is not None:  # held: the tail from start on, in order after the older part
            since = bisect_left(cached.positions, max(start, cached.low))
            positions += cached.positions[since:]
            messages += cached.messages[since:]
        self._parse(newer_from, newer, newer_counts, positions, messages)
        head_size = bisect_left(positions, start)
        generation = _text(epoch) if epoch else ""
        if messages and not generation:  # written before generations were kept: give it one
            generation = await self.generation(agent_id, session_id=session_id)
        if not messages or not epoch:
            self._drop(key, cache=False)
        elif self._cache_size:
            self._keep(self._windows, key, _Window(epoch, start, positions[-1], positions, messages))
        return HistoryWindow(messages, head_size, bool(complete), offset, generation)

    @staticmethod
    def _parse(
        first: int, bodies: list[bytes], entries: list[bytes], positions: list[int], messages: list[ChatMessage]
    ) -> None:
        """Add the messages read from position ``first`` on, with the counts stored beside them."""
        positions.extend(range(first, first + len(bodies)))
        messages += messages_from_json(bodies, [int(entry.split()[1]) for entry in entries])

    async def forget(self, agent_id: str, *, session_id: str | None = None) -> int:
        """Erase the session (every session of the agent when ``session_id`` is ``None``, found by ``SCAN``): its
        messages, summaries, counts and generation (``Forgetter``), one script per session; returns how many
        messages it held. Other processes' cached copies are never used again: every read checks the session's
        generation in Redis."""
        check_forget(agent_id, session_id)
        sessions = [session_id] if session_id is not None else await self._sessions_of(agent_id, "*")
        removed = 0
        for session in sessions:
            with mapped_errors():
                removed += int(await self.redis.run_script(_FORGET, self._keys(agent_id, session), []))
            self._drop((agent_id, session))
        return removed

    async def _sessions_of(self, agent_id: str, tail: str) -> list[str]:
        """The agent's session ids that have a key ending in ``tail`` (a glob), by ``SCAN``, sorted."""
        # ids are percent-escaped in keys, so no glob character of the agent id survives into the pattern
        pattern = f"{self.redis.prefix}:h:{{{part(agent_id)}|*}}:{tail}"
        found: set[str] = set()
        with mapped_errors():
            async for raw in self.redis.client.scan_iter(match=pattern, count=1_000):
                key = raw.decode() if isinstance(raw, bytes) else raw
                tag = key[key.index("{") + 1 : key.rindex("}")]
                owner, _, session = tag.partition("|")
                if unquote(owner) == agent_id:
                    found.add(unquote(session))
        return sorted(found)

    async def list_sessions(self, agent_id: str, *, limit: int = 100) -> list[str]:
        """Up to ``limit`` of the agent's session ids that hold messages, sorted. Scans the keys (``SCAN``, never
        ``KEYS``): meant for tools and the CLI, not for the request path."""
        check_scope(agent_id=agent_id)
        check_page(limit, 0)
        return (await self._sessions_of(agent_id, "messages"))[:limit]

    async def count_messages(self, agent_id: str, *, session_id: str) -> int:
        """How many messages the session holds (``LLEN``)."""
        check_scope(agent_id=agent_id, session_id=session_id)
        with mapped_errors():
            return int(await self.redis.client.llen(self._keys(agent_id, session_id)[0]))


__all__ = ["RedisHistoryProvider"]
