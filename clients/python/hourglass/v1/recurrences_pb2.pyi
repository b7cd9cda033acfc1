from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from hourglass.v1 import broker_pb2 as _broker_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DeleteRecurrenceRequest(_message.Message):
    __slots__ = ["id", "topic"]
    ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    id: str
    topic: str
    def __init__(self, topic: _Optional[str] = ..., id: _Optional[str] = ...) -> None: ...

class DeleteRecurrenceResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class GetRecurrenceRequest(_message.Message):
    __slots__ = ["id", "topic"]
    ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    id: str
    topic: str
    def __init__(self, topic: _Optional[str] = ..., id: _Optional[str] = ...) -> None: ...

class ListRecurrencesRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "topic"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    topic: str
    def __init__(self, topic: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListRecurrencesResponse(_message.Message):
    __slots__ = ["next_page_token", "recurrences"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    RECURRENCES_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    recurrences: _containers.RepeatedCompositeFieldContainer[Recurrence]
    def __init__(self, recurrences: _Optional[_Iterable[_Union[Recurrence, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class PauseRecurrenceRequest(_message.Message):
    __slots__ = ["id", "topic"]
    ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    id: str
    topic: str
    def __init__(self, topic: _Optional[str] = ..., id: _Optional[str] = ...) -> None: ...

class PreviewRecurrenceRequest(_message.Message):
    __slots__ = ["count", "rule"]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    FROM_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    count: int
    rule: RecurrenceRule
    def __init__(self, rule: _Optional[_Union[RecurrenceRule, _Mapping]] = ..., count: _Optional[int] = ..., **kwargs) -> None: ...

class PreviewRecurrenceResponse(_message.Message):
    __slots__ = ["fire_times"]
    FIRE_TIMES_FIELD_NUMBER: _ClassVar[int]
    fire_times: _containers.RepeatedCompositeFieldContainer[_timestamp_pb2.Timestamp]
    def __init__(self, fire_times: _Optional[_Iterable[_Union[_timestamp_pb2.Timestamp, _Mapping]]] = ...) -> None: ...

class PutRecurrenceRequest(_message.Message):
    __slots__ = ["spec"]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    spec: RecurrenceSpec
    def __init__(self, spec: _Optional[_Union[RecurrenceSpec, _Mapping]] = ...) -> None: ...

class Recurrence(_message.Message):
    __slots__ = ["last_fire_time", "misses", "next_fire_time", "occurrences", "paused", "spec"]
    LAST_FIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    MISSES_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    OCCURRENCES_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    last_fire_time: _timestamp_pb2.Timestamp
    misses: int
    next_fire_time: _timestamp_pb2.Timestamp
    occurrences: int
    paused: bool
    spec: RecurrenceSpec
    def __init__(self, spec: _Optional[_Union[RecurrenceSpec, _Mapping]] = ..., paused: bool = ..., next_fire_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., last_fire_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., occurrences: _Optional[int] = ..., misses: _Optional[int] = ...) -> None: ...

class RecurrenceRule(_message.Message):
    __slots__ = ["cron", "end_at", "every", "on_gap", "on_overlap", "start_at", "time_zone"]
    CRON_FIELD_NUMBER: _ClassVar[int]
    END_AT_FIELD_NUMBER: _ClassVar[int]
    EVERY_FIELD_NUMBER: _ClassVar[int]
    ON_GAP_FIELD_NUMBER: _ClassVar[int]
    ON_OVERLAP_FIELD_NUMBER: _ClassVar[int]
    START_AT_FIELD_NUMBER: _ClassVar[int]
    TIME_ZONE_FIELD_NUMBER: _ClassVar[int]
    cron: str
    end_at: _timestamp_pb2.Timestamp
    every: _duration_pb2.Duration
    on_gap: str
    on_overlap: str
    start_at: _timestamp_pb2.Timestamp
    time_zone: str
    def __init__(self, cron: _Optional[str] = ..., every: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., time_zone: _Optional[str] = ..., on_gap: _Optional[str] = ..., on_overlap: _Optional[str] = ..., start_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., end_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class RecurrenceSpec(_message.Message):
    __slots__ = ["catch_up", "expire_after", "headers", "id", "jitter", "limit", "misfire", "on_expire", "payload", "rule", "topic"]
    class HeadersEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CATCH_UP_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_AFTER_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    JITTER_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    MISFIRE_FIELD_NUMBER: _ClassVar[int]
    ON_EXPIRE_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    catch_up: _duration_pb2.Duration
    expire_after: _duration_pb2.Duration
    headers: _containers.ScalarMap[str, str]
    id: str
    jitter: _duration_pb2.Duration
    limit: int
    misfire: str
    on_expire: _broker_pb2.OnExpire
    payload: bytes
    rule: RecurrenceRule
    topic: str
    def __init__(self, id: _Optional[str] = ..., topic: _Optional[str] = ..., rule: _Optional[_Union[RecurrenceRule, _Mapping]] = ..., limit: _Optional[int] = ..., jitter: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., misfire: _Optional[str] = ..., catch_up: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., payload: _Optional[bytes] = ..., headers: _Optional[_Mapping[str, str]] = ..., expire_after: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., on_expire: _Optional[_Union[_broker_pb2.OnExpire, str]] = ...) -> None: ...

class ResumeRecurrenceRequest(_message.Message):
    __slots__ = ["id", "topic"]
    ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    id: str
    topic: str
    def __init__(self, topic: _Optional[str] = ..., id: _Optional[str] = ...) -> None: ...

class TriggerRecurrenceRequest(_message.Message):
    __slots__ = ["id", "topic"]
    ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    id: str
    topic: str
    def __init__(self, topic: _Optional[str] = ..., id: _Optional[str] = ...) -> None: ...

class TriggerRecurrenceResponse(_message.Message):
    __slots__ = ["fire_time", "message_id"]
    FIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    fire_time: _timestamp_pb2.Timestamp
    message_id: str
    def __init__(self, message_id: _Optional[str] = ..., fire_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
