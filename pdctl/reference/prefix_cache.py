"""Page-aligned prefix cache (a trie of full pages) shared by requests with a common prompt prefix.

Each node is one page of tokens and holds a reference on its full-pool page and, when still available,
its SWA-pool page. A match of P tokens is only usable when the SWA pages covering the window before P are
present (sliding layers need them), the same rule SGLang's SWA radix cache applies. Cached pages are never
written again (only complete pages are cached), so sharing them is safe.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pdctl.reference.kvcache import KVCache, SeqPages


@dataclass
class _Node:
    key: tuple[int, ...]
    full: int
    swa: int  # -1 when this page's SWA KV is not cached
    parent: _Node | None
    children: dict[tuple[int, ...], _Node] = field(default_factory=dict)
    last_used: int = 0


@dataclass(frozen=True)
class PrefixMatch:
    """A usable cached prefix: `pages` complete pages; SWA pages for the logical pages listed in `swa`."""

    pages: int
    full: list[int]
    swa: list[int]  # per logical page, -1 where not needed / not cached


class PrefixCache:
    """Trie of cached pages; `match`, `insert`, `evict`, `flush`. Used only from the engine thread."""

    def __init__(self, kv: KVCache, window: int | None) -> None:
        self.kv = kv
        self.ps = kv.page_size
        self.window = window if kv.swa_alloc is not None else None
        self.root = _Node((), -1, -1, None)
        self._clock = 0
        self._count = 0  # nodes in the trie (read by /server_info from another thread)

    def _pages(self, ids: list[int], n_pages: int) -> list[tuple[int, ...]]:
        return [tuple(ids[i * self.ps : (i + 1) * self.ps]) for i in range(n_pages)]

    def match(self, ids: list[int], max_tokens: int) -> PrefixMatch:
        """Longest usable cached prefix of IDS of at most MAX_TOKENS tokens (page-aligned)."""
        self._clock += 1
        path: list[_Node] = []
        node = self.root
        for key in self._pages(ids, max(0, max_tokens) // self.ps):
            child = node.children.get(key)
            if child is None:
                break
            path.append(child)
            node = child
        m = len(path)
        while m > 0 and not self._swa_ok(path, m):
            m -= 1
        for n in path[:m]:
            n.last_used = self._clock
        if m == 0:
            return PrefixMatch(0, [], [])
        swa: list[int] = []
        if self.window is not None:  # hybrid SWA memory: only the window's SWA pages are needed
            first = self._swa_first(m)
            swa = [path[i].swa if i >= first else -1 for i in range(m)]
        return PrefixMatch(m, [n.full for n in path[:m]], swa)

    def _swa_first(self, m: int) -> int:
        assert self.window is not None
        return max(0, m * self.ps - self.window) // self.ps

    def _swa_ok(self, path: list[_Node], m: int) -> bool:
        if self.window is None:
            return True
        return all(path[i].swa >= 0 for i in range(self._swa_first(m), m))

    def hold(self, match: PrefixMatch) -> None:
        """Take a request's references on a match's pages (released with the request's pages)."""
        self.kv.full_alloc.incref(match.full)
        if self.kv.swa_alloc is not None:
            self.kv.swa_alloc.incref([p for p in match.swa if p >= 0])

    def insert(self, ids: list[int], seq: SeqPages, n_tokens: int) -> None:
        """Cache the complete pages of IDS[:N_TOKENS] held by SEQ (adding SWA pages a node lacks)."""
        node = self.root
        for i, key in enumerate(self._pages(ids, n_tokens // self.ps)):
            child = node.children.get(key)
            swa = seq.swa[i] if i < len(seq.swa) else -1
            if child is None:
                child = _Node(key, seq.full[i], -1, node)
                self.kv.full_alloc.incref([seq.full[i]])
                node.children[key] = child
                self._count += 1
            if child.swa < 0 and swa >= 0 and child.full == seq.full[i]:
                child.swa = swa
                assert self.kv.swa_alloc is not None
                self.kv.swa_alloc.incref([swa])
            child.last_used = self._clock
            node = child

    def _drop(self, node: _Node) -> None:
        assert node.parent is not None
        del node.parent.children[node.key]
        self._count -= 1
        self.kv.full_alloc.release([node.full])
        if node.swa >= 0 and self.kv.swa_alloc is not None:
            self.kv.swa_alloc.release([node.swa])

    def evict(self) -> int:
        """Drop least-recently-used leaves whose pages nobody else holds; returns how many pages were freed."""
        freed = 0
        while True:
            leaves = [n for n in self._nodes() if not n.children and self._only_cache_holds(n)]
            if not leaves:
                return freed
            for n in sorted(leaves, key=lambda n: n.last_used):
                self._drop(n)
                freed += 1

    def _only_cache_holds(self, n: _Node) -> bool:
        if self.kv.full_alloc.refcount(n.full) != 1:
            return False
        return n.swa < 0 or self.kv.swa_alloc is None or self.kv.swa_alloc.refcount(n.swa) == 1

    def _nodes(self) -> list[_Node]:
        out, stack = [], list(self.root.children.values())
        while stack:
            n = stack.pop()
            out.append(n)
            stack.extend(n.children.values())
        return out

    def flush(self) -> int:
        """Empty the cache (requests keep their own references); returns the number of pages dropped."""
        nodes = self._nodes()
        for n in nodes:
            self.kv.full_alloc.release([n.full])
            if n.swa >= 0 and self.kv.swa_alloc is not None:
                self.kv.swa_alloc.release([n.swa])
        self.root.children.clear()
        self._count = 0
        return len(nodes)

    def evictable_pages(self) -> tuple[int, int]:
        """(full, swa) pages only the cache holds: what eviction can free (SGLang's evictable size)."""
        full = swa = 0
        for n in self._nodes():
            full += self.kv.full_alloc.refcount(n.full) == 1
            swa += n.swa >= 0 and self.kv.swa_alloc is not None and self.kv.swa_alloc.refcount(n.swa) == 1
        return full, swa

    @property
    def cached_pages(self) -> int:
        """Pages currently in the cache."""
        return self._count
