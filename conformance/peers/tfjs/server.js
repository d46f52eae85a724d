// The tfjs-cpu peer's Node process (conformance/peers/tfjs_peer.py starts one and reuses it).
//
// It runs tfjs's own CPU kernels, unmodified, through tf.engine().runKernel. Frames on stdin
// and stdout, little-endian:
//   request:  uint32 n, n bytes of JSON {kernel, attrs, inputs: [{name, dtype, shape}]},
//             then each input's raw bytes in that order (float32 or int32, C order)
//   response: uint32 n, n bytes of JSON {ok: true, dtype, shape} and the output's raw bytes,
//             or {ok: false, error} and nothing else
// stdout carries frames only: everything tfjs prints goes to stderr.
'use strict';
for (const name of ['log', 'info', 'warn', 'debug']) console[name] = console.error;

const tf = require('@tensorflow/tfjs-core');
require('@tensorflow/tfjs-backend-cpu');

const ARRAYS = {float32: Float32Array, int32: Int32Array};

function handle(header, body) {
  const tensors = {};
  let offset = 0;
  for (const spec of header.inputs) {
    const Type = ARRAYS[spec.dtype];
    const count = spec.shape.reduce((a, b) => a * b, 1);
    const bytes = body.subarray(offset, offset + count * Type.BYTES_PER_ELEMENT);
    offset += bytes.length;
    const values = new Type(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length));
    tensors[spec.name] = tf.tensor(values, spec.shape, spec.dtype);
  }
  try {
    const out = tf.engine().runKernel(header.kernel, tensors, header.attrs);
    const values = out.dataSync();
    const result = {ok: true, dtype: out.dtype, shape: out.shape};
    out.dispose();
    return [result, Buffer.from(values.buffer, values.byteOffset, values.byteLength)];
  } finally {
    for (const t of Object.values(tensors)) t.dispose();
  }
}

function send(header, payload) {
  const json = Buffer.from(JSON.stringify(header));
  const len = Buffer.alloc(4);
  len.writeUInt32LE(json.length, 0);
  process.stdout.write(Buffer.concat(payload ? [len, json, payload] : [len, json]));
}

let pending = Buffer.alloc(0);

function pump() {
  for (;;) {
    if (pending.length < 4) return;
    const n = pending.readUInt32LE(0);
    if (pending.length < 4 + n) return;
    const header = JSON.parse(pending.subarray(4, 4 + n).toString());
    const need = header.inputs.reduce(
        (acc, s) => acc + s.shape.reduce((a, b) => a * b, 1) * ARRAYS[s.dtype].BYTES_PER_ELEMENT, 0);
    if (pending.length < 4 + n + need) return;
    const body = pending.subarray(4 + n, 4 + n + need);
    pending = pending.subarray(4 + n + need);
    try {
      const [result, payload] = handle(header, body);
      send(result, payload);
    } catch (err) {
      send({ok: false, error: String(err && err.message ? err.message : err)});
    }
  }
}

tf.setBackend('cpu').then(() => {
  send({ok: true, ready: true, version: tf.version_core, backend: tf.getBackend()});
  process.stdin.on('data', (chunk) => {
    pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
    pump();
  });
  process.stdin.on('end', () => process.exit(0));
});
