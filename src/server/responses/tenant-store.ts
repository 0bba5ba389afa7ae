/**
 * Objects kept per tenant for later requests (stored responses, conversations): the most recently used over
 * all tenants, at most `capacity` of them and `maxBytes` (each as `sizeOf` measures it when stored), each
 * found only by the tenant that stored it. The one just stored is never the one forgotten, nor one that
 * `mustStay` holds on to.
 */
export class TenantStore<V> {
  private readonly kept = new Map<string, V>();
  private readonly sizes = new Map<string, number>();
  private bytes = 0;

  constructor(
    readonly capacity: number,
    readonly maxBytes: number,
    private readonly sizeOf: (value: V) => number,
    private readonly mustStay: (value: V) => boolean = () => false,
  ) {}

  /** Bytes of the kept objects, as measured when each was stored. */
  get storedBytes(): number {
    return this.bytes;
  }

  private static key(tenant: string | null, id: string): string {
    return `${tenant ?? ""}\u0000${id}`;
  }

  /** The tenant's object with this id, now the most recently used. */
  get(tenant: string | null, id: string): V | undefined {
    const key = TenantStore.key(tenant, id);
    const found = this.kept.get(key);
    if (found !== undefined) {
      this.kept.delete(key);
      this.kept.set(key, found);
    }
    return found;
  }

  /** Keeps `value` under `id` (replacing what was there; measured again), then forgets the oldest over the bounds. */
  set(tenant: string | null, id: string, value: V): void {
    const key = TenantStore.key(tenant, id);
    this.forget(key);
    const size = this.sizeOf(value);
    this.kept.set(key, value);
    this.sizes.set(key, size);
    this.bytes += size;
    for (const [oldest, entry] of this.kept) {
      if (this.kept.size <= this.capacity && this.bytes <= this.maxBytes) break;
      if (oldest !== key && !this.mustStay(entry)) this.forget(oldest);
    }
  }

  /** Whether there was such an object. */
  delete(tenant: string | null, id: string): boolean {
    return this.forget(TenantStore.key(tenant, id));
  }

  /** The tenant's objects, least recently used first. */
  *values(tenant: string | null): Generator<V> {
    const prefix = TenantStore.key(tenant, "");
    for (const [key, value] of this.kept) if (key.startsWith(prefix)) yield value;
  }

  private forget(key: string): boolean {
    this.bytes -= this.sizes.get(key) ?? 0;
    this.sizes.delete(key);
    return this.kept.delete(key);
  }
}
