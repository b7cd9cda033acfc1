from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
ON_EXPIRE_DEAD_LETTER: OnExpire
ON_EXPIRE_DROP: OnExpire

class Ack(_message.Message):
    __slots__ = ["ids"]
    IDS_FIELD_NUMBER: _ClassVar[int]
    ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, ids: _Optional[_Iterable[str]] = ...) -> None: ...

class CancelRequest(_message.Message):
    __slots__ = ["id", "topic"]
    ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    id: str
    topic: str
    def __init__(self, topic: _Optional[str] = ..., id: _Optional[str] = ...) -> None: ...

class CancelResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class Deadline(_message.Message):
    __slots__ = ["expire_at", "on_expire"]
    EXPIRE_AT_FIELD_NUMBER: _ClassVar[int]
    ON_EXPIRE_FIELD_NUMBER: _ClassVar[int]
    expire_at: _timestamp_pb2.Timestamp
    on_expire: OnExpire
    def __init__(self, expire_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., on_expire: _Optional[_Union[OnExpire, str]] = ...) -> None: ...

class Delivery(_message.Message):
    __slots__ = ["attempt", "deliver_at", "headers", "id", "payload", "published_at", "topic"]
    class HeadersEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    DELIVER_AT_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    PUBLISHED_AT_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    deliver_at: _timestamp_pb2.Timestamp
    headers: _containers.ScalarMap[str, str]
    id: str
    payload: bytes
    published_at: _timestamp_pb2.Timestamp
    topic: str
    def __init__(self, id: _Optional[str] = ..., topic: _Optional[str] = ..., payload: _Optional[bytes] = ..., headers: _Optional[_Mapping[str, str]] = ..., deliver_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., published_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., attempt: _Optional[int] = ...) -> None: ...

class DeliveryBatch(_message.Message):
    __slots__ = ["deliveries"]
    DELIVERIES_FIELD_NUMBER: _ClassVar[int]
    deliveries: _containers.RepeatedCompositeFieldContainer[Delivery]
    def __init__(self, deliveries: _Optional[_Iterable[_Union[Delivery, _Mapping]]] = ...) -> None: ...

class Message(_message.Message):
    __slots__ = ["delay", "deliver_at", "expire_at", "headers", "id", "on_expire", "payload", "topic", "ttl"]
    class HeadersEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    DELAY_FIELD_NUMBER: _ClassVar[int]
    DELIVER_AT_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_AT_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    ON_EXPIRE_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    delay: _duration_pb2.Duration
    deliver_at: _timestamp_pb2.Timestamp
    expire_at: _timestamp_pb2.Timestamp
    headers: _containers.ScalarMap[str, str]
    id: str
    on_expire: OnExpire
    payload: bytes
    topic: str
    ttl: _duration_pb2.Duration
    def __init__(self, topic: _Optional[str] = ..., payload: _Optional[bytes] = ..., headers: _Optional[_Mapping[str, str]] = ..., delay: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., deliver_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., id: _Optional[str] = ..., expire_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., ttl: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., on_expire: _Optional[_Union[OnExpire, str]] = ...) -> None: ...

class Nack(_message.Message):
    __slots__ = ["delay", "id"]
    DELAY_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    delay: _duration_pb2.Duration
    id: str
    def __init__(self, id: _Optional[str] = ..., delay: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class Open(_message.Message):
    __slots__ = ["ack_timeout", "group", "max_in_flight", "topic"]
    ACK_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    MAX_IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    ack_timeout: _duration_pb2.Duration
    group: str
    max_in_flight: int
    topic: str
    def __init__(self, topic: _Optional[str] = ..., group: _Optional[str] = ..., max_in_flight: _Optional[int] = ..., ack_timeout: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class PublishAnswer(_message.Message):
    __slots__ = ["code", "epoch", "message", "primary", "receipts", "shard_count"]
    CODE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_FIELD_NUMBER: _ClassVar[int]
    RECEIPTS_FIELD_NUMBER: _ClassVar[int]
    SHARD_COUNT_FIELD_NUMBER: _ClassVar[int]
    code: int
    epoch: int
    message: str
    primary: str
    receipts: _containers.RepeatedCompositeFieldContainer[Receipt]
    shard_count: int
    def __init__(self, receipts: _Optional[_Iterable[_Union[Receipt, _Mapping]]] = ..., code: _Optional[int] = ..., message: _Optional[str] = ..., primary: _Optional[str] = ..., epoch: _Optional[int] = ..., shard_count: _Optional[int] = ...) -> None: ...

class PublishRequest(_message.Message):
    __slots__ = ["messages"]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    def __init__(self, messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ...) -> None: ...

class PublishResponse(_message.Message):
    __slots__ = ["receipts"]
    RECEIPTS_FIELD_NUMBER: _ClassVar[int]
    receipts: _containers.RepeatedCompositeFieldContainer[Receipt]
    def __init__(self, receipts: _Optional[_Iterable[_Union[Receipt, _Mapping]]] = ...) -> None: ...

class PublishStreamResponse(_message.Message):
    __slots__ = ["answers"]
    ANSWERS_FIELD_NUMBER: _ClassVar[int]
    answers: _containers.RepeatedCompositeFieldContainer[PublishAnswer]
    def __init__(self, answers: _Optional[_Iterable[_Union[PublishAnswer, _Mapping]]] = ...) -> None: ...

class Receipt(_message.Message):
    __slots__ = ["deliver_at", "duplicate", "id"]
    DELIVER_AT_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    deliver_at: _timestamp_pb2.Timestamp
    duplicate: bool
    id: str
    def __init__(self, id: _Optional[str] = ..., deliver_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., duplicate: bool = ...) -> None: ...

class SubscribeRequest(_message.Message):
    __slots__ = ["ack", "nack", "open"]
    ACK_FIELD_NUMBER: _ClassVar[int]
    NACK_FIELD_NUMBER: _ClassVar[int]
    OPEN_FIELD_NUMBER: _ClassVar[int]
    ack: Ack
    nack: Nack
    open: Open
    def __init__(self, open: _Optional[_Union[Open, _Mapping]] = ..., ack: _Optional[_Union[Ack, _Mapping]] = ..., nack: _Optional[_Union[Nack, _Mapping]] = ...) -> None: ...

class OnExpire(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
