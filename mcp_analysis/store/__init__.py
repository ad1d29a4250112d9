"""LanceDB storage: schema, filters, atomic writes."""
