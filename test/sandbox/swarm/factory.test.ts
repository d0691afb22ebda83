import { describe, expect, it } from 'vitest';
import { swarmTaskRefusal } from '../../../src/sandbox/swarm/factory.js';

describe('the swarm sandbox refuses a server that is a swarm service task', () => {
  it('names the task and the service, and says how to run it instead', () => {
    const msg = swarmTaskRefusal({
      'com.docker.swarm.task.id': '7v36535ia9kjq4gec6dur194h',
      'com.docker.swarm.service.name': 'openenv_server',
      'com.docker.stack.namespace': 'openenv',
    });
    expect(msg).toMatch(/task 7v36535ia9kj of the swarm service openenv_server/);
    expect(msg).toMatch(/plain container on a manager node .*deploy\/swarm-manager\.sh/);
  });

  it('lets a plain container through', () => {
    expect(swarmTaskRefusal({})).toBeNull();
    expect(swarmTaskRefusal({ 'openenv-swarm-lab.test': '1' })).toBeNull();
  });
});
