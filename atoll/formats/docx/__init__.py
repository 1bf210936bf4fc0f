"""Word documents (.docx) as the documents tools and the grader read them.

- :mod:`.elements`: document order, the element identifiers (``body.p.3``,
  ``body.tbl.0.r.1.c.2``, ``header.s.0``) and paragraph/run text;
- :mod:`.reading`: blocks in document order with their identifiers, rendered as the tools
  show them (tracked changes as ``{++inserted++}`` / ``{--deleted--}``);
- :mod:`.comments`: comments with their anchors.

python-docx is imported only by the functions that need it (callers pass documents in).
"""
