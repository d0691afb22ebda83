/** The Sandbox contract (test/sandbox/contract.ts) on the Docker backend, against a real engine. */
import { dockerSandboxContract } from './contract-harness.js';

dockerSandboxContract('docker');
