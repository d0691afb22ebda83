/** The model gateway's room: what the episode machinery, the server's options and the tests use. */
export {
  ModelGateway,
  GatewayError,
  type GatewayEnv,
  type GatewayLimits,
  type GatewayOptions,
  type Issued,
  type IssueRequest,
  type EpisodeModelUse,
} from './gateway.js';
export { Door, DoorError, type DoorSpec } from './door.js';
export { localAddressIn } from '../util/cidr.js';
export { refuseEpisodeSources } from './api-guard.js';
export { ipv4Forwarding, wildcardListenPorts } from './exposure.js';
export { UpstreamSchema, BudgetsSchema, type Upstream, type UpstreamInput, type Budgets, type BudgetsInput } from './upstream.js';
export type { ModelCallRecord, GatewayObserver, GatewayEnd, GatewayEndReason, CallOutcome } from './records.js';
export type { Usage } from './reassembly.js';
export { APIS, type ApiName } from './apis.js';
