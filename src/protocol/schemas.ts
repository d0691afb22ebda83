/**
 * JSON Schemas served at `GET /schema` for the action, observation and state shapes of /ws.
 */

const toolSpec = {
  type: 'object',
  required: ['name', 'description', 'input_schema'],
  properties: { name: { type: 'string' }, description: { type: 'string' }, input_schema: { type: 'object' } },
};

export const ACTION_SCHEMA = {
  title: 'Action',
  oneOf: [
    { type: 'object', required: ['type'], properties: { type: { const: 'list_tools' } } },
    {
      type: 'object',
      required: ['type', 'tool_name'],
      properties: {
        type: { const: 'call_tool' },
        tool_name: { type: 'string', minLength: 1 },
        arguments: { type: 'object', description: 'the tool\'s parameters; anything else is answered with error_type invalid_args' },
      },
    },
  ],
};

const failure = {
  type: 'object',
  required: ['reason', 'phase', 'retryable', 'message', 'episode_id', 'task_id'],
  properties: {
    reason: {
      enum: ['deploy_timeout', 'image_unavailable', 'env_crashed', 'env_oom', 'env_unreachable', 'tool_timeout', 'episode_timeout', 'invalid_scores', 'engine_error', 'shutting_down'],
    },
    phase: { enum: ['queue', 'deploy', 'reset', 'tool', 'finish', 'teardown'] },
    retryable: { type: 'boolean' },
    message: { type: 'string' },
    episode_id: { type: 'string' },
    task_id: { type: 'string' },
    exit_code: { type: ['integer', 'null'] },
    log_tail: { type: 'string' },
  },
};

export const OBSERVATION_SCHEMA = {
  title: 'Observation',
  description: 'data.observation of an observation frame: a reset reply, a list_tools reply or a call_tool reply; an ending reply adds end_reason, timings and scores or failure',
  type: 'object',
  properties: {
    episode_id: { type: 'string' },
    task_id: { type: 'string' },
    split: { type: 'string' },
    index: { type: 'integer' },
    seed: { type: ['integer', 'null'] },
    toolset: { type: 'string' },
    messages: { type: 'array', items: { type: 'object', properties: { role: { type: 'string' }, content: { type: 'string' } } } },
    tools: { type: 'array', items: toolSpec },
    turn: { type: 'integer' },
    turns: { type: 'integer' },
    max_turns: { type: 'integer' },
    tool_name: { type: 'string' },
    result: {
      type: ['object', 'null'],
      properties: {
        content: { type: 'array', items: { type: 'object', properties: { type: { const: 'text' }, text: { type: 'string' } } } },
        structured_content: { type: ['object', 'null'] },
        data: {},
        is_error: { type: 'boolean' },
      },
    },
    error: {
      type: ['object', 'null'],
      properties: {
        error_type: { enum: ['invalid_args', 'tool_not_found', 'execution_error', 'timeout', 'transport_error'] },
        message: { type: 'string' },
      },
    },
    done: { type: 'boolean' },
    reward: { type: ['number', 'null'] },
    end_reason: { enum: ['finished', 'turns_ended', 'max_steps', 'env_failed'] },
    timings: { type: 'object', properties: { queued_s: { type: 'number' }, deploy_s: { type: 'number' }, running_s: { type: 'number' } } },
    scores: { type: 'object', additionalProperties: { type: 'number' } },
    failure,
  },
};

export const STATE_SCHEMA = {
  title: 'State',
  type: 'object',
  required: ['episode_id', 'task_id', 'step_count', 'turn', 'done', 'phase'],
  properties: {
    episode_id: { type: ['string', 'null'] },
    task_id: { type: ['string', 'null'] },
    step_count: { type: 'integer' },
    turn: { type: 'integer' },
    done: { type: 'boolean' },
    phase: { enum: ['idle', 'waiting', 'deploying', 'running', 'done'] },
  },
};
