/**
 * The offline Node base image that test, bench and soak images build FROM instead of a public
 * base (docker/make-local-node-base.sh makes it); OPENENV_TEST_NODE_IMAGE names another.
 */
export const LOCAL_NODE_IMAGE = process.env.OPENENV_TEST_NODE_IMAGE ?? 'openenv-local/node:20';
