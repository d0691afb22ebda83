import { checkStatic } from '/work/wt/check-fast/dist/authoring/check-static.js';
const st = await checkStatic('/work/wt/check-fast/bundles/gridsim-v1');
console.log(st.bundle.manifest.envs.gridsim.clean_reset);
await st.bundle.cleanup();
