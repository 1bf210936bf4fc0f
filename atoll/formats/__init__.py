"""How the world's files are read: one reader per format for the app servers and the grader.

The agent reads a file through an app server's tools and the judge reads the same file
through the grader; both go through these modules, so they see the same values, the same
formulas and the same element ids (sheet, slide, page, paragraph, message, event).

This package depends on neither ``mcp_servers`` nor ``grader`` (both import it). Importing
it is cheap: the heavy libraries (lxml, openpyxl, python-docx, python-pptx, pymupdf,
icalendar) are imported inside the functions that need them.

- :mod:`atoll.formats.xlsx`: workbook cells (value and formula in one pass), sheet parts.
- :mod:`atoll.formats.libreoffice`: formula recalculation (one warm soffice per process).
- :mod:`atoll.formats.xlsx_values`: computed values written into a workbook's formula cells.
- :mod:`atoll.formats.docx`: Word documents (element identifiers, blocks, comments).
- :mod:`atoll.formats.pptx`: PowerPoint decks (shapes in order, slide markdown, pictures).
- :mod:`atoll.formats.pdf`: PDF pages (text engines, OCR and its cache).
- :mod:`atoll.formats.mail`: mbox files (index, headers, body text, attachments).
- :mod:`atoll.formats.ics`: calendar files split into component blocks.
- :mod:`atoll.formats.chat`: Google Chat Takeout messages (index, timestamps, reactions).
"""
