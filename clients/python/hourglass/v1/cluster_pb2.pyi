from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ClusterMap(_message.Message):
    __slots__ = ["cluster", "controller", "draining", "hash", "node", "nodes", "pins", "shard_count", "shards"]
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    DRAINING_FIELD_NUMBER: _ClassVar[int]
    HASH_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    PINS_FIELD_NUMBER: _ClassVar[int]
    SHARDS_FIELD_NUMBER: _ClassVar[int]
    SHARD_COUNT_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    controller: str
    draining: _containers.RepeatedScalarFieldContainer[str]
    hash: str
    node: str
    nodes: _containers.RepeatedCompositeFieldContainer[ClusterNode]
    pins: _containers.RepeatedCompositeFieldContainer[ShardPin]
    shard_count: int
    shards: _containers.RepeatedCompositeFieldContainer[ShardInfo]
    def __init__(self, cluster: _Optional[str] = ..., node: _Optional[str] = ..., controller: _Optional[str] = ..., hash: _Optional[str] = ..., shard_count: _Optional[int] = ..., nodes: _Optional[_Iterable[_Union[ClusterNode, _Mapping]]] = ..., shards: _Optional[_Iterable[_Union[ShardInfo, _Mapping]]] = ..., draining: _Optional[_Iterable[str]] = ..., pins: _Optional[_Iterable[_Union[ShardPin, _Mapping]]] = ...) -> None: ...

class ClusterNode(_message.Message):
    __slots__ = ["address", "id", "zone"]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    ZONE_FIELD_NUMBER: _ClassVar[int]
    address: str
    id: str
    zone: str
    def __init__(self, id: _Optional[str] = ..., address: _Optional[str] = ..., zone: _Optional[str] = ...) -> None: ...

class DrainNodeRequest(_message.Message):
    __slots__ = ["node", "undo"]
    NODE_FIELD_NUMBER: _ClassVar[int]
    UNDO_FIELD_NUMBER: _ClassVar[int]
    node: str
    undo: bool
    def __init__(self, node: _Optional[str] = ..., undo: bool = ...) -> None: ...

class DrainNodeResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class GetClusterMapRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class MoveShardRequest(_message.Message):
    __slots__ = ["node", "shard", "undo"]
    NODE_FIELD_NUMBER: _ClassVar[int]
    SHARD_FIELD_NUMBER: _ClassVar[int]
    UNDO_FIELD_NUMBER: _ClassVar[int]
    node: str
    shard: int
    undo: bool
    def __init__(self, shard: _Optional[int] = ..., node: _Optional[str] = ..., undo: bool = ...) -> None: ...

class MoveShardResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class RecoverShardRequest(_message.Message):
    __slots__ = ["accept_loss", "node", "shard"]
    ACCEPT_LOSS_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    SHARD_FIELD_NUMBER: _ClassVar[int]
    accept_loss: bool
    node: str
    shard: int
    def __init__(self, shard: _Optional[int] = ..., node: _Optional[str] = ..., accept_loss: bool = ...) -> None: ...

class RecoverShardResponse(_message.Message):
    __slots__ = ["acknowledged_epoch", "acknowledged_index", "copy_epoch", "copy_index", "epoch", "loss", "recovered"]
    ACKNOWLEDGED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ACKNOWLEDGED_INDEX_FIELD_NUMBER: _ClassVar[int]
    COPY_EPOCH_FIELD_NUMBER: _ClassVar[int]
    COPY_INDEX_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LOSS_FIELD_NUMBER: _ClassVar[int]
    RECOVERED_FIELD_NUMBER: _ClassVar[int]
    acknowledged_epoch: int
    acknowledged_index: int
    copy_epoch: int
    copy_index: int
    epoch: int
    loss: str
    recovered: bool
    def __init__(self, copy_epoch: _Optional[int] = ..., copy_index: _Optional[int] = ..., acknowledged_epoch: _Optional[int] = ..., acknowledged_index: _Optional[int] = ..., loss: _Optional[str] = ..., recovered: bool = ..., epoch: _Optional[int] = ...) -> None: ...

class ReplicaLag(_message.Message):
    __slots__ = ["applied_index", "durable_index", "in_sync", "lag_entries", "node", "seconds_since_heard"]
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    DURABLE_INDEX_FIELD_NUMBER: _ClassVar[int]
    IN_SYNC_FIELD_NUMBER: _ClassVar[int]
    LAG_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    SECONDS_SINCE_HEARD_FIELD_NUMBER: _ClassVar[int]
    applied_index: int
    durable_index: int
    in_sync: bool
    lag_entries: int
    node: str
    seconds_since_heard: float
    def __init__(self, node: _Optional[str] = ..., applied_index: _Optional[int] = ..., durable_index: _Optional[int] = ..., lag_entries: _Optional[int] = ..., seconds_since_heard: _Optional[float] = ..., in_sync: bool = ...) -> None: ...

class ShardInfo(_message.Message):
    __slots__ = ["eligible", "epoch", "isr", "lag", "last_index", "primary", "replicas", "shard", "transfer_to"]
    ELIGIBLE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    ISR_FIELD_NUMBER: _ClassVar[int]
    LAG_FIELD_NUMBER: _ClassVar[int]
    LAST_INDEX_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    SHARD_FIELD_NUMBER: _ClassVar[int]
    TRANSFER_TO_FIELD_NUMBER: _ClassVar[int]
    eligible: _containers.RepeatedScalarFieldContainer[str]
    epoch: int
    isr: _containers.RepeatedScalarFieldContainer[str]
    lag: _containers.RepeatedCompositeFieldContainer[ReplicaLag]
    last_index: int
    primary: str
    replicas: _containers.RepeatedScalarFieldContainer[str]
    shard: int
    transfer_to: str
    def __init__(self, shard: _Optional[int] = ..., epoch: _Optional[int] = ..., primary: _Optional[str] = ..., replicas: _Optional[_Iterable[str]] = ..., isr: _Optional[_Iterable[str]] = ..., last_index: _Optional[int] = ..., lag: _Optional[_Iterable[_Union[ReplicaLag, _Mapping]]] = ..., transfer_to: _Optional[str] = ..., eligible: _Optional[_Iterable[str]] = ...) -> None: ...

class ShardPin(_message.Message):
    __slots__ = ["node", "shard"]
    NODE_FIELD_NUMBER: _ClassVar[int]
    SHARD_FIELD_NUMBER: _ClassVar[int]
    node: str
    shard: int
    def __init__(self, shard: _Optional[int] = ..., node: _Optional[str] = ...) -> None: ...
