// The QR code of an otpauth:// URI, drawn as SVG in the browser (qrcode-generator, MIT, no
// dependencies): the secret never leaves the page for a QR service. Loaded only when shown.
import qrcode from 'qrcode-generator';

export function QrCode(props: { text: string; label: string }) {
  const qr = qrcode(0, 'M');
  qr.addData(props.text);
  qr.make();
  const n = qr.getModuleCount();
  const margin = 4;
  let d = '';
  for (let row = 0; row < n; row++) {
    for (let col = 0; col < n; col++) if (qr.isDark(row, col)) d += `M${col + margin} ${row + margin}h1v1h-1z`;
  }
  const size = n + 2 * margin;
  return (
    <svg class="qr" viewBox={`0 0 ${size} ${size}`} role="img" aria-label={props.label} shape-rendering="crispEdges">
      <rect width={size} height={size} fill="#fff" />
      <path d={d} fill="#000" />
    </svg>
  );
}
