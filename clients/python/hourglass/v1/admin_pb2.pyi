from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from hourglass.v1 import broker_pb2 as _broker_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
MESSAGE_STATE_DEAD: MessageState
MESSAGE_STATE_IN_FLIGHT: MessageState
MESSAGE_STATE_READY: MessageState
MESSAGE_STATE_SCHEDULED: MessageState
MESSAGE_STATE_UNSPECIFIED: MessageState

class CreateGroupRequest(_message.Message):
    __slots__ = ["group", "topic"]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    group: str
    topic: str
    def __init__(self, topic: _Optional[str] = ..., group: _Optional[str] = ...) -> None: ...

class CreateSnapshotRequest(_message.Message):
    __slots__ = ["dir"]
    DIR_FIELD_NUMBER: _ClassVar[int]
    dir: str
    def __init__(self, dir: _Optional[str] = ...) -> None: ...

class DeleteGroupRequest(_message.Message):
    __slots__ = ["group", "topic"]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    group: str
    topic: str
    def __init__(self, topic: _Optional[str] = ..., group: _Optional[str] = ...) -> None: ...

class DeleteGroupResponse(_message.Message):
    __slots__ = ["removed"]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    removed: int
    def __init__(self, removed: _Optional[int] = ...) -> None: ...

class GetMessageRequest(_message.Message):
    __slots__ = ["id", "preview_bytes", "topic"]
    ID_FIELD_NUMBER: _ClassVar[int]
    PREVIEW_BYTES_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    id: str
    preview_bytes: int
    topic: str
    def __init__(self, topic: _Optional[str] = ..., id: _Optional[str] = ..., preview_bytes: _Optional[int] = ...) -> None: ...

class GetScheduleRequest(_message.Message):
    __slots__ = ["bucket", "to", "topic"]
    BUCKET_FIELD_NUMBER: _ClassVar[int]
    FROM_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    bucket: _duration_pb2.Duration
    to: _timestamp_pb2.Timestamp
    topic: str
    def __init__(self, topic: _Optional[str] = ..., to: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., bucket: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., **kwargs) -> None: ...

class GetScheduleResponse(_message.Message):
    __slots__ = ["buckets", "total"]
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    buckets: _containers.RepeatedCompositeFieldContainer[ScheduleBucket]
    total: int
    def __init__(self, buckets: _Optional[_Iterable[_Union[ScheduleBucket, _Mapping]]] = ..., total: _Optional[int] = ...) -> None: ...

class GetStatsRequest(_message.Message):
    __slots__ = ["topic"]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    topic: str
    def __init__(self, topic: _Optional[str] = ...) -> None: ...

class GetStatsResponse(_message.Message):
    __slots__ = ["format_version", "not_serving_reason", "serving", "started_at", "store_id", "topics", "version"]
    FORMAT_VERSION_FIELD_NUMBER: _ClassVar[int]
    NOT_SERVING_REASON_FIELD_NUMBER: _ClassVar[int]
    SERVING_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    STORE_ID_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    format_version: int
    not_serving_reason: str
    serving: bool
    started_at: _timestamp_pb2.Timestamp
    store_id: str
    topics: _containers.RepeatedCompositeFieldContainer[TopicStats]
    version: str
    def __init__(self, topics: _Optional[_Iterable[_Union[TopicStats, _Mapping]]] = ..., started_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., version: _Optional[str] = ..., format_version: _Optional[int] = ..., store_id: _Optional[str] = ..., serving: bool = ..., not_serving_reason: _Optional[str] = ...) -> None: ...

class Group(_message.Message):
    __slots__ = ["consumers", "created_at", "in_flight", "name", "ready", "topic"]
    CONSUMERS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    consumers: int
    created_at: _timestamp_pb2.Timestamp
    in_flight: int
    name: str
    ready: int
    topic: str
    def __init__(self, topic: _Optional[str] = ..., name: _Optional[str] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., ready: _Optional[int] = ..., in_flight: _Optional[int] = ..., consumers: _Optional[int] = ...) -> None: ...

class GroupDelivery(_message.Message):
    __slots__ = ["attempt", "group", "redeliver_at", "state"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    REDELIVER_AT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    group: str
    redeliver_at: _timestamp_pb2.Timestamp
    state: MessageState
    def __init__(self, group: _Optional[str] = ..., state: _Optional[_Union[MessageState, str]] = ..., attempt: _Optional[int] = ..., redeliver_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class GroupStats(_message.Message):
    __slots__ = ["ack_rate", "consumers", "group", "in_flight", "ready"]
    ACK_RATE_FIELD_NUMBER: _ClassVar[int]
    CONSUMERS_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    ack_rate: float
    consumers: int
    group: str
    in_flight: int
    ready: int
    def __init__(self, group: _Optional[str] = ..., ready: _Optional[int] = ..., in_flight: _Optional[int] = ..., consumers: _Optional[int] = ..., ack_rate: _Optional[float] = ...) -> None: ...

class ListGroupsRequest(_message.Message):
    __slots__ = ["topic"]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    topic: str
    def __init__(self, topic: _Optional[str] = ...) -> None: ...

class ListGroupsResponse(_message.Message):
    __slots__ = ["groups"]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedCompositeFieldContainer[Group]
    def __init__(self, groups: _Optional[_Iterable[_Union[Group, _Mapping]]] = ...) -> None: ...

class ListMessagesRequest(_message.Message):
    __slots__ = ["due_from", "due_to", "group", "page_size", "page_token", "state", "topic"]
    DUE_FROM_FIELD_NUMBER: _ClassVar[int]
    DUE_TO_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    due_from: _timestamp_pb2.Timestamp
    due_to: _timestamp_pb2.Timestamp
    group: str
    page_size: int
    page_token: str
    state: MessageState
    topic: str
    def __init__(self, topic: _Optional[str] = ..., state: _Optional[_Union[MessageState, str]] = ..., group: _Optional[str] = ..., due_from: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., due_to: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListMessagesResponse(_message.Message):
    __slots__ = ["messages", "next_page_token"]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[MessageInfo]
    next_page_token: str
    def __init__(self, messages: _Optional[_Iterable[_Union[MessageInfo, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListTopicsRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListTopicsResponse(_message.Message):
    __slots__ = ["topics"]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[Topic]
    def __init__(self, topics: _Optional[_Iterable[_Union[Topic, _Mapping]]] = ...) -> None: ...

class MessageInfo(_message.Message):
    __slots__ = ["attempt", "deadline", "deliver_at", "groups", "headers", "id", "payload_preview", "payload_size", "published_at", "state", "topic"]
    class HeadersEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    DELIVER_AT_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_PREVIEW_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_SIZE_FIELD_NUMBER: _ClassVar[int]
    PUBLISHED_AT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    deadline: _broker_pb2.Deadline
    deliver_at: _timestamp_pb2.Timestamp
    groups: _containers.RepeatedCompositeFieldContainer[GroupDelivery]
    headers: _containers.ScalarMap[str, str]
    id: str
    payload_preview: bytes
    payload_size: int
    published_at: _timestamp_pb2.Timestamp
    state: MessageState
    topic: str
    def __init__(self, id: _Optional[str] = ..., topic: _Optional[str] = ..., state: _Optional[_Union[MessageState, str]] = ..., deliver_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., published_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., payload_size: _Optional[int] = ..., headers: _Optional[_Mapping[str, str]] = ..., payload_preview: _Optional[bytes] = ..., groups: _Optional[_Iterable[_Union[GroupDelivery, _Mapping]]] = ..., attempt: _Optional[int] = ..., deadline: _Optional[_Union[_broker_pb2.Deadline, _Mapping]] = ...) -> None: ...

class Percentiles(_message.Message):
    __slots__ = ["max", "p50", "p90", "p99"]
    MAX_FIELD_NUMBER: _ClassVar[int]
    P50_FIELD_NUMBER: _ClassVar[int]
    P90_FIELD_NUMBER: _ClassVar[int]
    P99_FIELD_NUMBER: _ClassVar[int]
    max: _duration_pb2.Duration
    p50: _duration_pb2.Duration
    p90: _duration_pb2.Duration
    p99: _duration_pb2.Duration
    def __init__(self, p50: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., p90: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., p99: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., max: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class PurgeTopicRequest(_message.Message):
    __slots__ = ["ready", "scheduled", "topic"]
    READY_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    ready: bool
    scheduled: bool
    topic: str
    def __init__(self, topic: _Optional[str] = ..., scheduled: bool = ..., ready: bool = ...) -> None: ...

class PurgeTopicResponse(_message.Message):
    __slots__ = ["purged"]
    PURGED_FIELD_NUMBER: _ClassVar[int]
    purged: int
    def __init__(self, purged: _Optional[int] = ...) -> None: ...

class RedriveDeadLettersRequest(_message.Message):
    __slots__ = ["ids", "topic"]
    IDS_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    ids: _containers.RepeatedScalarFieldContainer[str]
    topic: str
    def __init__(self, topic: _Optional[str] = ..., ids: _Optional[_Iterable[str]] = ...) -> None: ...

class RedriveDeadLettersResponse(_message.Message):
    __slots__ = ["redriven"]
    REDRIVEN_FIELD_NUMBER: _ClassVar[int]
    redriven: int
    def __init__(self, redriven: _Optional[int] = ...) -> None: ...

class RescheduleRequest(_message.Message):
    __slots__ = ["delay", "deliver_at", "id", "topic"]
    DELAY_FIELD_NUMBER: _ClassVar[int]
    DELIVER_AT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    delay: _duration_pb2.Duration
    deliver_at: _timestamp_pb2.Timestamp
    id: str
    topic: str
    def __init__(self, topic: _Optional[str] = ..., id: _Optional[str] = ..., delay: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., deliver_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ScheduleBucket(_message.Message):
    __slots__ = ["count", "start"]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    count: int
    start: _timestamp_pb2.Timestamp
    def __init__(self, start: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., count: _Optional[int] = ...) -> None: ...

class Snapshot(_message.Message):
    __slots__ = ["bytes", "dir", "files", "format_version", "shards", "started_at", "store_id", "took"]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    DIR_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    FORMAT_VERSION_FIELD_NUMBER: _ClassVar[int]
    SHARDS_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    STORE_ID_FIELD_NUMBER: _ClassVar[int]
    TOOK_FIELD_NUMBER: _ClassVar[int]
    bytes: int
    dir: str
    files: int
    format_version: int
    shards: int
    started_at: _timestamp_pb2.Timestamp
    store_id: str
    took: _duration_pb2.Duration
    def __init__(self, dir: _Optional[str] = ..., files: _Optional[int] = ..., bytes: _Optional[int] = ..., format_version: _Optional[int] = ..., store_id: _Optional[str] = ..., started_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., took: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., shards: _Optional[int] = ...) -> None: ...

class Topic(_message.Message):
    __slots__ = ["dead_lettered", "groups", "in_flight", "name", "ready", "scheduled"]
    DEAD_LETTERED_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_FIELD_NUMBER: _ClassVar[int]
    dead_lettered: int
    groups: int
    in_flight: int
    name: str
    ready: int
    scheduled: int
    def __init__(self, name: _Optional[str] = ..., scheduled: _Optional[int] = ..., groups: _Optional[int] = ..., ready: _Optional[int] = ..., in_flight: _Optional[int] = ..., dead_lettered: _Optional[int] = ...) -> None: ...

class TopicStats(_message.Message):
    __slots__ = ["dead_lettered", "delivery_rate", "groups", "in_flight", "lateness", "publish_rate", "ready", "scheduled", "topic"]
    DEAD_LETTERED_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_RATE_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    LATENESS_FIELD_NUMBER: _ClassVar[int]
    PUBLISH_RATE_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    dead_lettered: int
    delivery_rate: float
    groups: _containers.RepeatedCompositeFieldContainer[GroupStats]
    in_flight: int
    lateness: Percentiles
    publish_rate: float
    ready: int
    scheduled: int
    topic: str
    def __init__(self, topic: _Optional[str] = ..., scheduled: _Optional[int] = ..., ready: _Optional[int] = ..., in_flight: _Optional[int] = ..., dead_lettered: _Optional[int] = ..., publish_rate: _Optional[float] = ..., delivery_rate: _Optional[float] = ..., lateness: _Optional[_Union[Percentiles, _Mapping]] = ..., groups: _Optional[_Iterable[_Union[GroupStats, _Mapping]]] = ...) -> None: ...

class MessageState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
