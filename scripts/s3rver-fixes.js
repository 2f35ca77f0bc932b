// Fixes two bugs of s3rver 3.7.1 (the S3 test server of scripts/install-s3rver.sh) that break
// S3's read-after-write guarantees the s3 plugin's tests rely on:
//  1. PUT, UploadPart and CompleteMultipartUpload answer before the bytes are on disk: the
//     promise resolves when the incoming stream ends, not when the file stream has written it.
//     A HEAD or GET right after can see a missing, empty or short object.
//     Under load PluginsCheckTest's "a write is invisible until Close" failed so, once: the HEAD
//     after Close found no object yet (404); the one-byte GET with which the s3 storage asks for
//     the error's S3 code (ExplainHeadFailure in plugins/s3/src/s3_storage.cc) came after the
//     write and, through bug 2, got the whole object: "server sent more than the 1 requested
//     bytes (Range ignored?)".
//  2. A ranged GET whose last byte is 0 ("Range: bytes=0-0") returns the whole object, because
//     the store reads the end as `options.end || Infinity`.
// Usage: node scripts/s3rver-fixes.js S3RVER_PACKAGE_DIR. Idempotent: a fixed file is left as it
// is; a file that matches neither the original nor the fixed text is an error (another version).
// The fixed file starts with `marker`, which the tests' S3rverProcess looks for before it starts
// the server (plugins/s3/tests/s3_test_env.cc).
'use strict';
const fs = require('fs');
const path = require('path');

const marker = '// reel: scripts/s3rver-fixes.js applied\n';
const fixes = [
  {
    what: 'PutObject of a buffer answers after the file is written',
    from: `        writeStream.end(object.content);
        md5Context.update(object.content);
        resolve([object.content.length, md5Context.digest('hex')]);`,
    to: `        md5Context.update(object.content);
        const written = [object.content.length, md5Context.digest('hex')];
        writeStream.on('error', reject).on('close', () => resolve(written));
        writeStream.end(object.content);`,
  },
  {
    what: 'PutObject of a stream answers after the file is written',
    from: `          .on('error', reject)
          .on('finish', () => resolve([totalLength, md5Context.digest('hex')]))
          .pipe(writeStream);`,
    to: `          .on('error', reject)
          .pipe(writeStream)
          .on('error', reject)
          .on('close', () => resolve([totalLength, md5Context.digest('hex')]));`,
  },
  {
    what: 'UploadPart answers after the part is written',
    from: `        .on('error', reject)
        .on('finish', () => {
          resolve([totalLength, md5Context.digest('hex')]);
        })
        .pipe(writeStream);`,
    to: `        .on('error', reject)
        .pipe(writeStream)
        .on('error', reject)
        .on('close', () => {
          resolve([totalLength, md5Context.digest('hex')]);
        });`,
  },
  {
    what: 'a range ending at byte 0 is honoured',
    from: `        end: Math.min((options && options.end) || Infinity, lastByte),`,
    to: `        end: Math.min(
          options && options.end !== undefined ? options.end : Infinity,
          lastByte,
        ),`,
  },
];

const dir = process.argv[2];
if (!dir) {
  console.error('usage: node s3rver-fixes.js S3RVER_PACKAGE_DIR');
  process.exit(2);
}
const file = path.join(dir, 'lib', 'stores', 'filesystem.js');
let text = fs.readFileSync(file, 'utf8');
let changed = 0;
for (const f of fixes) {
  if (text.includes(f.to)) continue;
  if (!text.includes(f.from)) {
    console.error(`s3rver-fixes: ${file}: cannot apply "${f.what}": text not found (not s3rver 3.7.1?)`);
    process.exit(1);
  }
  text = text.replace(f.from, f.to);
  ++changed;
}
if (!text.startsWith(marker)) text = marker + text, ++changed;
if (changed) fs.writeFileSync(file, text);
console.log(`s3rver-fixes: ${file}: ` + (changed ? 'fixed' : 'already fixed'));
