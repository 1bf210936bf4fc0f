"""Mail as stored in a world: mbox files (``.apps_data/mail/**/*.mbox``).

The mail server's tools and the grader read them with these modules, so a message has the
same ``mail_id``, sender, recipients, body and attachments for the agent and the judge.

- :mod:`.mbox`: message boundaries, reading one message, appending one;
- :mod:`.headers`: the header parser and address/id helpers;
- :mod:`.index`: the per-file index (one :class:`~.index.MailEntry` per message);
- :mod:`.text`: body text and attachments of a message.
"""
