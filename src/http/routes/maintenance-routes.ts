import { randomBytes } from 'node:crypto';
import type { RequestHandler, Response } from 'express';
import { createRequire } from 'node:module';
import type Multer from 'multer';
import type { Principal } from '../../auth/auth-service.js';
import { BadRequestError, PayloadTooLargeError } from '../../errors/errors.js';
import type { MaintenanceService, RestoreUpload } from '../../maintenance/maintenance-service.js';
import { principalOf, type RouteModule } from '../create-http-app.js';

const RESTORE_PATH = '/api/maintenance/db/restore';

function actorOf(res: Response): { userId?: string; username?: string } {
  const p = res.locals.principal as Principal | undefined;
  return p ? { userId: p.userId, username: p.username } : {};
}

export function maintenanceRoutes(deps: { maintenance: MaintenanceService }): RouteModule {
  const { maintenance } = deps;
  return (r) => {
    r.get('/api/maintenance/db', (_req, res) => void res.json(maintenance.status()));

    r.post('/api/maintenance/db/backup', (_req, res) => {
      res.status(202).json(maintenance.startBackup(actorOf(res)));
    });

    r.get('/api/maintenance/db/backup', async (_req, res) => {
      const archive = await maintenance.newestArchive();
      res.status(200);
      res.setHeader('Content-Type', 'application/gzip');
      res.setHeader('Content-Length', String(archive.size));
      res.setHeader('Content-Disposition', `attachment; filename="${archive.fileName}"`);
      res.setHeader('Cache-Control', 'no-store');
      archive.stream.on('error', () => res.destroy());
      res.on('close', () => archive.stream.destroy());
      archive.stream.pipe(res);
    });

    r.post(RESTORE_PATH, async (req, res) => {
      const upload = res.locals.restoreUpload as RestoreUpload | undefined;
      if (!upload || !req.file) throw new BadRequestError("multipart field 'file' (the backup archive) is required");
      await upload.start(req.file.path);
      res.status(202).end();
    });
  };
}

interface MulterLikeError {
  code?: string;
  message?: string;
}

/**
 * The restore upload, run after authorization and before request validation: takes the
 * lock (423 while another operation runs), then receives the file with multer into
 * <data>/tmp/maintenance with the configured size limit (413 beyond it, file removed).
 */
export function maintenanceUploadHandler(deps: {
  maintenance: MaintenanceService;
  uploadLimitBytes: number;
}): { method: string; path: string; handler: RequestHandler } {
  const { maintenance, uploadLimitBytes } = deps;
  // multer (and busboy) is loaded by the first restore upload.
  let receiver: RequestHandler | undefined;
  const receive: RequestHandler = (req, res, next) => {
    if (!receiver) {
      const multer = createRequire(import.meta.url)('multer') as typeof Multer;
      const storage = multer.diskStorage({
        destination: (_req, _file, cb) => cb(null, maintenance.paths.tmp),
        filename: (_req, _file, cb) => cb(null, `upload-${randomBytes(12).toString('hex')}`),
      });
      receiver = multer({
        storage,
        limits: { fileSize: uploadLimitBytes, files: 1, fields: 8, fieldSize: 1024, fieldNameSize: 100, parts: 10 },
      }).single('file');
    }
    return receiver(req, res, next);
  };

  const handler: RequestHandler = async (req, res, next) => {
    if (req.path !== '/') return next();
    // Authentication and authorization already ran (create-http-app): nobody anonymous or
    // unauthorized gets to write to the disk or take the maintenance lock.
    const principal = principalOf(res);
    const upload = maintenance.beginRestoreUpload({ userId: principal.userId, username: principal.username });
    res.locals.restoreUpload = upload;
    // Whatever ends this request before the route takes the file (validation error, client
    // gone) ends the restore too: recorded, lock released, file removed.
    res.once('close', () => {
      if (!upload.settled) upload.fail(`the request ended before the archive was checked (HTTP ${res.statusCode})`, req.file?.path);
    });
    receive(req, res, (err: unknown) => {
      if (err) {
        const e = err as MulterLikeError;
        let mapped: Error;
        if (e.code === 'LIMIT_FILE_SIZE') mapped = new PayloadTooLargeError(`the archive exceeds the upload limit of ${uploadLimitBytes} bytes`);
        else if (e.code === 'LIMIT_UNEXPECTED_FILE') mapped = new BadRequestError(`unexpected file field; send the archive as multipart field 'file'`);
        else if (typeof e.code === 'string' && e.code.startsWith('LIMIT_')) mapped = new BadRequestError(`invalid multipart request: ${e.message ?? e.code}`);
        else mapped = new BadRequestError(`the upload failed: ${e.message ?? String(err)}`);
        upload.fail(mapped.message, req.file?.path);
        return next(mapped);
      }
      if (!req.file) {
        const mapped = new BadRequestError("multipart field 'file' (the backup archive) is required");
        upload.fail(mapped.message);
        return next(mapped);
      }
      // The validator (fileUploader: false) checks req.body against the schema, whose `file`
      // is required: the file itself is in req.file, so mark the field as present.
      (req.body as Record<string, unknown>).file = '';
      next();
    });
  };
  return { method: 'POST', path: RESTORE_PATH, handler };
}
