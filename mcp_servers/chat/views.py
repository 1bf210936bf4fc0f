"""What the chat tools return for a channel, a post and a person."""

from __future__ import annotations

from typing import Any

from atoll.formats.chat.messages import Message, reactions

#: Short names agents use for reactions, mapped to the emoji Takeout stores.
EMOJI_NAMES = {
    "thumbsup": "👍",
    "+1": "👍",
    "thumbs_up": "👍",
    "like": "👍",
    "thumbsdown": "👎",
    "-1": "👎",
    "thumbs_down": "👎",
    "heart": "❤️",
    "love": "❤️",
    "smile": "😄",
    "smiley": "😃",
    "grinning": "😀",
    "joy": "😂",
    "laughing": "😆",
    "tada": "🎉",
    "party": "🎉",
    "eyes": "👀",
    "rocket": "🚀",
    "white_check_mark": "✅",
    "check": "✅",
    "heavy_check_mark": "✔️",
    "ok_hand": "👌",
    "fire": "🔥",
    "pray": "🙏",
    "clap": "👏",
    "100": "💯",
    "thinking": "🤔",
    "thinking_face": "🤔",
    "wave": "👋",
    "raised_hands": "🙌",
    "muscle": "💪",
    "star": "⭐",
    "x": "❌",
    "warning": "⚠️",
    "question": "❓",
    "exclamation": "❗",
    "sob": "😭",
    "cry": "😢",
    "slightly_smiling_face": "🙂",
    "wink": "😉",
    "sunglasses": "😎",
    "bulb": "💡",
    "memo": "📝",
    "calendar": "📅",
    "coffee": "☕",
    "handshake": "🤝",
}


def emoji_of(name: str) -> str | None:
    """The emoji for ``name`` (an emoji itself, ``:tada:`` or ``tada``), None when unknown."""
    text = name.strip()
    if text and not text.isascii():
        return text
    return EMOJI_NAMES.get(text.strip(":").lower())


def reactions_view(record: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"emoji": label, "count": len(users), "users": users} for label, users in reactions(record)]


def post_view(channel_id: str, message: Message, *, reply_count: int | None = None) -> dict[str, Any]:
    """A post as the tools show it (text cleared and ``deleted`` true for deleted posts)."""
    view: dict[str, Any] = {
        "post_id": message.message_id,
        "channel_id": channel_id,
        "topic_id": message.topic_id,
        "author": {"name": message.author_name, "email": message.author_email},
        "created_at": message.created.isoformat() if message.created else None,
        "created_date": message.record.get("created_date"),
        "text": "" if message.deleted else message.text,
        "is_reply": not message.is_root,
        "deleted": message.deleted,
        "reactions": reactions_view(message.record),
    }
    files = message.record.get("attached_files")
    if isinstance(files, list) and files and not message.deleted:
        view["attachments"] = [
            str(f.get("export_name") or f.get("original_name") or f) if isinstance(f, dict) else str(f)
            for f in files
        ]
    if reply_count is not None:
        view["reply_count"] = reply_count
    return view


def person(raw: Any) -> dict[str, str] | None:
    """``{"name", "email", "user_type"}`` from a Takeout person object, None if unusable."""
    if not isinstance(raw, dict) or not (raw.get("email") or raw.get("name")):
        return None
    return {
        "name": str(raw.get("name") or ""),
        "email": str(raw.get("email") or ""),
        "user_type": str(raw.get("user_type") or "Human"),
    }
