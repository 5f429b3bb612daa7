// Rule sandbox: a JSONata transformation tried on a JSON input by the gateway itself
// (POST /api/rule-engine/transform, with the same bounds as live rules), the output, or the
// error with its position marked in the expression.
import { useState } from 'preact/hooks';
import { ApiError, api } from '../api.js';
import { ErrorMessage } from '../components/feedback.js';
import { Button, TextArea } from '../components/forms.js';
import { useAction } from '../hooks.js';

const sampleInput = JSON.stringify({ machine: 'press-7', registers: [215, 3], unit: 'dC' }, null, 2);
const sampleExpression = "{\n  'machine': machine,\n  'celsius': registers[0] / 10,\n  'alarm': registers[1] > 2\n}";

/** JSONata reports where it stopped as "(position N)": the character index after the offending token. */
function errorPosition(err: unknown): number | undefined {
  if (!(err instanceof ApiError)) return undefined;
  const m = /\(position (\d+)\)/.exec(err.message);
  return m ? Number(m[1]) : undefined;
}

function Marked(props: { text: string; position: number }) {
  const at = Math.min(Math.max(props.position - 1, 0), props.text.length);
  const line = props.text.slice(0, at).split('\n').length;
  return (
    <figure>
      <figcaption>
        The expression stops at character {props.position} (line {line}):
      </figcaption>
      <pre class="expr-marker" data-testid="error-position">
        {props.text.slice(0, at)}
        <mark>{props.text.slice(at, at + 1) || ' '}</mark>
        {props.text.slice(at + 1)}
      </pre>
    </figure>
  );
}

export function RulesPage() {
  const [input, setInput] = useState(sampleInput);
  const [expression, setExpression] = useState(sampleExpression);
  const [inputError, setInputError] = useState<string | undefined>(undefined);
  const [output, setOutput] = useState<{ value: unknown } | null>(null);
  const [tried, setTried] = useState('');
  const action = useAction();
  const position = errorPosition(action.error);

  return (
    <section class="page">
      <h1>Rule sandbox</h1>
      <p class="hint">
        Try a JSONata expression (the <code>transform</code> and <code>filter</code> of endpoints and mappings) on a JSON value. <code>$</code> is the input. The gateway evaluates it with the bounds of
        live rules (time, depth, size).
      </p>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          let value: unknown;
          try {
            value = JSON.parse(input);
            setInputError(undefined);
          } catch (err) {
            setInputError(`The input is not JSON: ${(err as Error).message}`);
            return;
          }
          setTried(expression);
          void action.run(async () => {
            setOutput(null);
            setOutput({ value: await api<unknown>('POST', '/api/rule-engine/transform', { body: { input: value, transformation: expression }, as: 'json' }) });
          });
        }}
      >
        <div class="split">
          <TextArea label="Input (JSON)" value={input} onValue={setInput} rows={10} invalid={inputError} maxLength={1048576} />
          <TextArea label="Transformation (JSONata)" value={expression} onValue={setExpression} rows={10} required maxLength={65536} />
        </div>
        <Button type="submit" variant="primary" busy={action.busy}>
          Run
        </Button>
      </form>
      <section class="panel" aria-labelledby="out-title" aria-live="polite">
        <h2 id="out-title">Result</h2>
        <ErrorMessage error={action.error} />
        {position !== undefined && <Marked text={tried} position={position} />}
        {output &&
          (output.value === null || output.value === undefined ? (
            <p>
              <code>null</code>: the expression yields nothing for this input.
            </p>
          ) : (
            <pre aria-label="Output">{JSON.stringify(output.value, null, 2)}</pre>
          ))}
        {!output && !action.error && <p class="hint">Run the expression to see its output.</p>}
      </section>
    </section>
  );
}
