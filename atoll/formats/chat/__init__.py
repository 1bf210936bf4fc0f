"""Chat as stored in a world: a Google Chat Takeout export (``.apps_data/chat/``).

- :mod:`.messages`: one group's ``messages.json`` as an index of :class:`~.messages.Message`;
- :mod:`.timestamps`: Takeout's ``created_date`` text to aware UTC datetimes.
"""
