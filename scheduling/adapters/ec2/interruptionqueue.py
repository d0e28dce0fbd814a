"""The interruption queue (Karpenter's INTERRUPTION_QUEUE): an SQS queue EventBridge fills with EC2
interruption events. ReceiveMessage as upstream polls it (10 messages, visibility 20 s, long poll);
a message is deleted only by its consumer, after it was acted on, so a worker that dies mid-way
leaves it to be received again."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .client import Caller, EC2Config, make_client, setting

VISIBILITY_SECONDS = 20


@dataclass(frozen=True)
class QueueMessage:
    body: str
    receipt: str
    message_id: str = ""


class InterruptionQueue:
    def __init__(self, sqs: Any, call: Caller, name_or_url: str, wait_seconds: int = 20) -> None:
        self._sqs, self._call, self._wait = sqs, call, wait_seconds
        self._name = name_or_url
        self._url = name_or_url if name_or_url.startswith(("https://", "http://")) else None

    @classmethod
    def from_settings(cls, config: EC2Config | None = None, wait_seconds: int = 20) -> InterruptionQueue | None:
        """None when KARPWEB_INTERRUPTION_QUEUE is not set (interruption handling is off, as upstream)."""
        name = setting("KARPWEB_INTERRUPTION_QUEUE")
        if not name:
            return None
        config = config or EC2Config.from_settings()
        sqs = make_client("sqs", config, setting("KARPWEB_SQS_ENDPOINT_URL", config.endpoint_url))
        return cls(sqs, Caller(config), name, wait_seconds)

    @classmethod
    def for_account(cls, name_or_url: str, config: EC2Config, session, wait_seconds: int = 20) -> InterruptionQueue:
        """A fleet cluster's queue (fleet.Cluster.interruption_queue), in its account's session and region."""
        sqs = make_client("sqs", config, setting("KARPWEB_SQS_ENDPOINT_URL", config.endpoint_url), session)
        return cls(sqs, Caller(config), name_or_url, wait_seconds)

    @property
    def url(self) -> str:
        if self._url is None:
            self._url = self._call(self._sqs, "get_queue_url", QueueName=self._name)["QueueUrl"]
        return self._url

    def receive(self, max_messages: int = 10) -> list[QueueMessage]:
        answer = self._call(self._sqs, "receive_message", QueueUrl=self.url, MaxNumberOfMessages=max_messages,
                            VisibilityTimeout=VISIBILITY_SECONDS, WaitTimeSeconds=self._wait)
        return [QueueMessage(m.get("Body", ""), m["ReceiptHandle"], m.get("MessageId", ""))
                for m in answer.get("Messages") or []]

    def delete(self, message: QueueMessage) -> None:
        self._call(self._sqs, "delete_message", QueueUrl=self.url, ReceiptHandle=message.receipt)
