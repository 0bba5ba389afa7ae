/** What happens to a finished non-last request's KV. */
export type Retention = { readonly kind: "free" } | { readonly kind: "pin"; readonly ttlS: number };

export const FREE: Retention = { kind: "free" };
