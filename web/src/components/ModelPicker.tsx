// The model a prompt runs with (`provider/model`); empty means the deployment's default.

export const MODELS = [
  "anthropic/claude-sonnet-4-5",
  "anthropic/claude-opus-4-1",
  "anthropic/claude-haiku-4-5",
  "openai/gpt-5",
  "openai/gpt-5-mini",
];

export function ModelPicker({ value, onChange, id = "model" }: { value: string; onChange: (v: string) => void; id?: string }) {
  return (
    <span class="model-picker">
      <label for={id}>Model</label>
      <input
        id={id}
        list={`${id}-options`}
        value={value}
        placeholder="default"
        size={22}
        onInput={(e) => onChange(e.currentTarget.value.trim())}
      />
      <datalist id={`${id}-options`}>
        {MODELS.map((m) => (
          <option value={m} />
        ))}
      </datalist>
    </span>
  );
}
