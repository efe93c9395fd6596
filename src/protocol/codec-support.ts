/**
 * Small pieces the generated codecs share. Hand-written; the generated modules import it.
 */
import type { TaggedField } from "./reader.ts";
import type { Writer } from "./writer.ts";

export const EMPTY_BYTES: Uint8Array = new Uint8Array(0);
export const ZERO_UUID = "00000000-0000-0000-0000-000000000000";

/**
 * Writes a tagged-field section: the known fields that differ from their defaults and the unknown fields
 * kept from decoding, merged in ascending tag order as the protocol requires.
 */
export function writeTaggedFields(
  w: Writer,
  unknown: readonly TaggedField[] | undefined,
  known: readonly [number, (tw: Writer) => void][] | undefined,
): void {
  const unknownCount = unknown?.length ?? 0;
  const knownCount = known?.length ?? 0;
  w.uvarint(unknownCount + knownCount);
  if (unknownCount === 0) {
    for (let i = 0; i < knownCount; i++) w.taggedField(known![i]![0], known![i]![1]);
    return;
  }
  let k = 0;
  for (const field of unknown!) {
    while (k < knownCount && known![k]![0] < field.tag) {
      w.taggedField(known![k]![0], known![k]![1]);
      k++;
    }
    w.unknownTaggedField(field);
  }
  for (; k < knownCount; k++) w.taggedField(known![k]![0], known![k]![1]);
}
