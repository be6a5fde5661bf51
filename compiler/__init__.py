"""gpuc compiler: TFLite -> IR -> passes -> GLSL -> SPIR-V -> bundle."""


def compile_model(model, output=None, **options):
    from gpuc.compiler.driver import compile_model as _compile
    return _compile(model, output=output, **options)
