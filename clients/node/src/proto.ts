import * as path from 'path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

/** The package's copies of api/hourglass/v1/*.proto. */
export const PROTO_DIR = path.join(__dirname, '..', 'proto');

let loaded: {
  Broker: grpc.ServiceClientConstructor; Admin: grpc.ServiceClientConstructor;
  Cluster: grpc.ServiceClientConstructor; Recurrences: grpc.ServiceClientConstructor;
} | undefined;

/** The four services' client constructors, loaded once from the .proto files. */
export function services() {
  if (!loaded) {
    const definition = protoLoader.loadSync(
      ['hourglass/v1/broker.proto', 'hourglass/v1/admin.proto', 'hourglass/v1/cluster.proto',
        'hourglass/v1/recurrences.proto'],
      { includeDirs: [PROTO_DIR], keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true },
    );
    const v1 = (grpc.loadPackageDefinition(definition) as any).hourglass.v1;
    loaded = { Broker: v1.Broker, Admin: v1.Admin, Cluster: v1.Cluster, Recurrences: v1.Recurrences };
  }
  return loaded;
}
