/**
 * Each score's mean beside the mean reward, in the overview's group and task tables (as vf-eval
 * prints each rubric function's mean): a column per score the rows report, by name. The scores
 * are the ones the env reports, which the bundle declares (bundle.json's `scores`).
 */
import type { ScoreMeans } from './types';

/** the score names any of `rows` reports, by name */
export function scoreNames(rows: readonly { scores: ScoreMeans }[]): string[] {
  return [...new Set(rows.flatMap((r) => Object.keys(r.scores)))].sort();
}

export function ScoreHeads(props: { names: readonly string[] }) {
  return (
    <>
      {props.names.map((name) => (
        <th key={name} data-score={name} title={`the mean of the score ${name} over the scored episodes that reported it`}>
          mean {name}
        </th>
      ))}
    </>
  );
}

/** a row's means, '—' for a score it has none of */
export function ScoreCells(props: { names: readonly string[]; scores: ScoreMeans }) {
  return (
    <>
      {props.names.map((name) => (
        <td key={name} class="num" data-score={name}>
          {props.scores[name] ?? '—'}
        </td>
      ))}
    </>
  );
}
