/**
 * The Sandbox contract (test/sandbox/contract.ts) on the Docker backend with every env under
 * gVisor (`runtime: 'runsc'`, the server's `--runtime runsc`), against a real engine with runsc
 * registered (deploy/register-runsc.sh, as CI does). The engine does not always see an OOM kill
 * under gVisor (docs/security.md): the contract allows env_crashed with 137 there.
 */
import { dockerSandboxContract } from './contract-harness.js';

dockerSandboxContract('docker under gVisor', { runtime: 'runsc', oomMayBeUnseen: true });
