"""Browsing tools: list_files, search_files, get_directory_tree, get_file_metadata."""

from __future__ import annotations

import contextlib
import fnmatch
import mimetypes
import stat
from typing import Annotated, Any

from pydantic import BaseModel, Field

from atoll.errors import ErrorCode
from mcp_servers._core import ServerContext, ToolError, WorldPath
from mcp_servers.filesystem.entries import Entry, child_virtual, describe, human_size, iso_time, scan
from mcp_servers.filesystem.server import SERVER

MAX_TREE_ENTRIES = 500
# Bounds the work of one search on a huge tree; the result says when it was hit.
MAX_SEARCH_VISITS = 200_000


class Listing(BaseModel):
    path: str
    entries: list[Entry]
    total: int
    offset: int
    limit: int
    has_more: bool
    next_offset: int | None = None

    def render_text(self) -> str:
        lines = [
            f"{self.path} ({self.total} entries; showing {self.offset + 1 if self.entries else 0}-{self.offset + len(self.entries)})"
        ]
        for entry in self.entries:
            if entry.type == "directory":
                lines.append(f"  [dir]  {entry.name}/")
            else:
                extra = f"  ({entry.note})" if entry.note else ""
                lines.append(f"  {human_size(entry.size):>9}  {entry.name}{extra}")
        if self.has_more:
            lines.append(f"  ... more: call list_files(path={self.path!r}, offset={self.next_offset})")
        return "\n".join(lines)


@SERVER.tool(action="list", read_only=True)
def list_files(
    ctx: ServerContext,
    path: str = "/",
    offset: Annotated[int, Field(ge=0)] = 0,
    limit: Annotated[int, Field(ge=1, le=1000)] = 200,
) -> Listing:
    """List the files and folders in a folder, folders first, sorted by name, paginated.

    Args:
        path: folder to list, e.g. "/" or "/Reports".
        offset: number of entries to skip (for the next page).
        limit: maximum entries to return (1-1000).
    """
    directory = ctx.files.at(path, argument="path")
    virtual = directory.virtual
    entries = scan(directory, virtual)  # not_found / not_a_directory, from the one open
    page = entries[offset : offset + limit]
    more = offset + len(page) < len(entries)
    return Listing(
        path=virtual,
        entries=page,
        total=len(entries),
        offset=offset,
        limit=limit,
        has_more=more,
        next_offset=offset + len(page) if more else None,
    )


class SearchResult(BaseModel):
    pattern: str
    path: str
    matches: list[Entry]
    truncated: bool
    note: str | None = None

    def render_text(self) -> str:
        head = f"{len(self.matches)} match(es) for {self.pattern!r} under {self.path}"
        lines = [head + (" (more exist; raise max_results or narrow the pattern)" if self.truncated else "")]
        lines += [f"  {m.path}{'/' if m.type == 'directory' else ''}" for m in self.matches]
        if self.note:
            lines.append(self.note)
        return "\n".join(lines)


def _matcher(pattern: str):
    """Glob (``*.xlsx``, ``**/q3*``) when the pattern has wildcards, else a substring of the name."""
    lowered = pattern.casefold()
    has_glob = any(ch in pattern for ch in "*?[")
    on_path = "/" in pattern.strip("/")

    def match(name: str, relative: str) -> bool:
        if not has_glob:
            return lowered in name.casefold()
        if on_path:
            target = relative.casefold()
            return fnmatch.fnmatchcase(target, lowered.lstrip("/")) or fnmatch.fnmatchcase(
                target, lowered.lstrip("/").replace("**/", "")
            )
        return fnmatch.fnmatchcase(name.casefold(), lowered.replace("**/", ""))

    return match


@SERVER.tool(action="search", read_only=True)
def search_files(
    ctx: ServerContext,
    pattern: str,
    path: str = "/",
    recursive: bool = True,
    max_results: Annotated[int, Field(ge=1, le=1000)] = 100,
) -> SearchResult:
    """Find files and folders by name: a glob ("*.xlsx", "Reports/*q3*") or a plain substring ("budget").

    Matching is case-insensitive; results are sorted by path. Links are not followed.

    Args:
        pattern: glob pattern or substring of the name; a pattern with "/" matches the path below `path`.
        path: folder to search in.
        recursive: also search sub-folders.
        max_results: maximum matches to return (1-1000).
    """
    if not pattern.strip():
        raise ToolError(ErrorCode.invalid_argument, "pattern: must not be empty", argument="pattern")
    top = ctx.files.at(path, argument="path").require("dir")
    base_virtual = top.virtual
    match = _matcher(pattern.strip())
    found: list[Entry] = []
    visits = 0
    truncated = False
    note = None
    walk = top.walk()
    for dir_parts, listed in walk:
        listed.sort(key=lambda e: (e.name.casefold(), e.name))
        rel_dir = "/".join(dir_parts)
        folder = WorldPath(top.root, top.parts + dir_parts, "path")
        for item in listed:
            visits += 1
            relative = f"{rel_dir}/{item.name}" if rel_dir else item.name
            if match(item.name, relative):
                found.append(describe(folder, item, child_virtual(base_virtual, relative)))
                if len(found) > max_results:
                    truncated = True
                    break
        if truncated:
            break
        if visits >= MAX_SEARCH_VISITS:
            truncated = True
            note = f"stopped after looking at {MAX_SEARCH_VISITS} entries; search a smaller folder"
            break
        if not recursive:
            break
    walk.close()
    found = sorted(found, key=lambda e: (e.path.casefold(), e.path))[:max_results]
    return SearchResult(pattern=pattern, path=base_virtual, matches=found, truncated=truncated, note=note)


class TreeNode(BaseModel):
    name: str
    type: str
    size: int | None = None
    children: list[TreeNode] | None = None
    note: str | None = None


class Tree(BaseModel):
    path: str
    tree: TreeNode
    entries: int
    truncated: bool
    text: str

    def render_text(self) -> str:
        tail = (
            f"\n(stopped at {MAX_TREE_ENTRIES} entries; use a smaller max_depth or a sub-folder)"
            if self.truncated
            else ""
        )
        return self.text + tail


@SERVER.tool(action="tree", read_only=True)
def get_directory_tree(
    ctx: ServerContext,
    path: str = "/",
    max_depth: Annotated[int, Field(ge=1, le=10)] = 3,
    include_files: bool = True,
    show_size: bool = False,
) -> Tree:
    """Show a folder as a tree, folders first, sorted by name (at most 500 entries).

    Args:
        path: folder at the top of the tree.
        max_depth: how many levels below it to show (1-10).
        include_files: show files, not only folders.
        show_size: show file sizes.
    """
    top = ctx.files.at(path, argument="path").require("dir")
    virtual = top.virtual
    count = 0
    truncated = False
    lines = [virtual]

    def build(directory: WorldPath, dir_virtual: str, depth: int, prefix: str) -> list[TreeNode]:
        nonlocal count, truncated
        try:
            entries = scan(directory, dir_virtual)
        except ToolError:
            return []
        if not include_files:
            entries = [e for e in entries if e.type == "directory"]
        nodes: list[TreeNode] = []
        for index, entry in enumerate(entries):
            if count >= MAX_TREE_ENTRIES:
                truncated = True
                break
            count += 1
            last = index == len(entries) - 1
            size = f" ({human_size(entry.size)})" if show_size and entry.type == "file" else ""
            suffix = "/" if entry.type == "directory" else ""
            lines.append(f"{prefix}{'└── ' if last else '├── '}{entry.name}{suffix}{size}")
            node = TreeNode(
                name=entry.name, type=entry.type, size=entry.size if show_size else None, note=entry.note
            )
            if entry.type == "directory" and entry.note is None and depth < max_depth:
                node.children = build(
                    directory.child(entry.name), entry.path, depth + 1, prefix + ("    " if last else "│   ")
                )
            nodes.append(node)
        return nodes

    root = TreeNode(name=virtual, type="directory", children=build(top, virtual, 1, ""))
    return Tree(path=virtual, tree=root, entries=count, truncated=truncated, text="\n".join(lines))


class Metadata(BaseModel):
    path: str
    name: str
    type: str
    size: int | None
    modified: str
    accessed: str
    changed: str
    permissions: str
    mime_type: str | None
    extension: str
    is_link: bool
    entries: int | None = None
    width: int | None = None
    height: int | None = None

    def render_text(self) -> str:
        data: dict[str, Any] = self.model_dump(exclude_none=True)
        return "\n".join(f"{key}: {value}" for key, value in data.items())


@SERVER.tool(action="metadata", read_only=True)
def get_file_metadata(ctx: ServerContext, file_path: str) -> Metadata:
    """Size, times, type and permissions of a file or folder (image files: width and height).

    Args:
        file_path: file or folder to describe.
    """
    target = ctx.files.at(file_path, argument="file_path")
    virtual = target.virtual
    is_link = not target.is_root and stat.S_ISLNK(target.lstat().st_mode)
    info = target.stat()
    kind = "directory" if stat.S_ISDIR(info.st_mode) else "file" if stat.S_ISREG(info.st_mode) else "other"
    name = target.name or "/"
    meta = Metadata(
        path=virtual,
        name=name,
        type=kind,
        size=info.st_size if kind == "file" else None,
        modified=iso_time(info.st_mtime),
        accessed=iso_time(info.st_atime),
        changed=iso_time(info.st_ctime),
        permissions=stat.filemode(info.st_mode),
        mime_type=mimetypes.guess_type(name)[0] if kind == "file" else None,
        extension=target.suffix.lower() if kind == "file" else "",
        is_link=is_link,
    )
    if kind == "directory":
        with contextlib.suppress(ToolError):
            meta.entries = len(target.entries())
    elif (meta.mime_type or "").startswith("image/"):
        from mcp_servers.filesystem.images import image_size

        with contextlib.suppress(ToolError), target.open() as handle:
            meta.width, meta.height = image_size(handle)
    return meta


TreeNode.model_rebuild()
