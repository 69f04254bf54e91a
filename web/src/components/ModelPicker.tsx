// The model a prompt or a session runs with (`provider/model`), chosen from the deployment's
// catalog (`GET /models`); empty means the default. The reasoning efforts offered are the
// chosen model's.

import { useEffect, useState } from "preact/hooks";
import { get } from "../api";
import type { ModelCatalog, ModelInfo } from "../types";

let catalog: Promise<ModelCatalog | null> | null = null;

/** The deployment's catalog, read once per page load (`reload` reads it again). */
export function useModels(reload = 0): ModelCatalog | null {
  const [models, setModels] = useState<ModelCatalog | null>(null);
  useEffect(() => {
    if (reload > 0 || !catalog) catalog = get<ModelCatalog>("/models").catch(() => null);
    void catalog.then(setModels);
  }, [reload]);
  return models;
}

/** The efforts offered when the model is not known here (the deployment's default). */
const USUAL_EFFORTS = ["low", "medium", "high"];

export function effortsOf(models: ModelCatalog | null, model: string): string[] {
  const id = model || models?.defaultModel || "";
  const found = models?.models.find((m) => m.id === id);
  return found ? found.efforts : USUAL_EFFORTS;
}

export function ModelPicker({ value, onChange, id = "model" }: { value: string; onChange: (v: string) => void; id?: string }) {
  const models = useModels();
  const enabled: ModelInfo[] = models?.models.filter((m) => m.enabled) ?? [];
  const unknown = value && !enabled.some((m) => m.id === value);
  return (
    <span class="model-picker">
      <label for={id}>Model</label>
      <select id={id} value={value} onChange={(e) => onChange(e.currentTarget.value)}>
        <option value="">{models?.defaultModel ? `default (${models.defaultModel})` : "default"}</option>
        {enabled.map((m) => (
          <option value={m.id}>{`${m.label} (${m.id})`}</option>
        ))}
        {unknown && <option value={value}>{value}</option>}
      </select>
    </span>
  );
}

export function EffortPicker({ model, value, onChange }: { model: string; value: string; onChange: (v: string) => void }) {
  const models = useModels();
  const efforts = effortsOf(models, model);
  useEffect(() => {
    if (value && !efforts.includes(value)) onChange("");
  }, [model, models]);
  return (
    <label>
      Reasoning{" "}
      <select value={value} onChange={(e) => onChange(e.currentTarget.value)} aria-label="Reasoning effort" disabled={efforts.length === 0}>
        <option value="">{efforts.length === 0 ? "not for this model" : "the model's default"}</option>
        {efforts.map((e) => (
          <option value={e}>{e}</option>
        ))}
      </select>
    </label>
  );
}
