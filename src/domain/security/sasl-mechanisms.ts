/** The SASL mechanisms bunka serves, in the order sasl.enabled.mechanisms is checked against. */
export const SASL_MECHANISMS: readonly string[] = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"];
